//! Message and reasoning items: text and refusal deltas into content parts, reasoning deltas
//! into reasoning text or a summary (as the request's reasoning display says), and closing the
//! open item (sealing reasoning into `encrypted_content` when asked).
//!
//! Not here: tool calls (`calls`, `closing`), which close the open text item before they start.

use toolbridge_wire::responses::{
    EventKind, OutputContent, OutputItem, OutputMessage, ProviderState, ProviderStateEntry,
    ReasoningContent, ReasoningItem, StreamEvent, SummaryPart,
};

use super::machine::{Assembler, Open, Part};
use crate::diagnostics::{REASONING_NOT_SEALED, diag};
use crate::reasoning::sealed_plaintext;

impl Assembler {
    /// `encrypted_content` for reasoning text, when the request asked for it.
    fn seal(&mut self, text: &str) -> Option<String> {
        if !self.reasoning_display.encrypted {
            return None;
        }
        let sealed = self.sealer.as_ref().and_then(|s| s.seal(text));
        if sealed.is_none() {
            self.add_diagnostic(diag(
                REASONING_NOT_SEALED,
                Some("include"),
                "the reasoning could not be sealed into encrypted_content (too large, or no key)",
            ));
        }
        sealed
    }

    pub(super) fn text(&mut self, delta: String, refusal: bool, out: &mut Vec<StreamEvent>) {
        if delta.is_empty() {
            return;
        }
        if !refusal {
            self.round
                .text
                .get_or_insert_with(String::new)
                .push_str(&delta);
        }
        self.saw_output = true;
        if !matches!(self.current, Open::Message { .. }) {
            self.close_current(out);
            let index = self.open_slot();
            let id = self.next_id("msg");
            self.push(
                out,
                EventKind::OutputItemAdded {
                    output_index: index,
                    item: OutputItem::Message(OutputMessage {
                        id: id.clone(),
                        status: "in_progress".to_owned(),
                        role: "assistant".to_owned(),
                        content: Vec::new(),
                    }),
                },
            );
            self.current = Open::Message {
                index,
                id,
                parts: Vec::new(),
            };
        }
        let Open::Message { index, id, parts } = &mut self.current else {
            return;
        };
        let (index, id) = (*index, id.clone());
        let need_new_part = parts.last().is_none_or(|p| p.refusal != refusal);
        let mut events = Vec::with_capacity(3);
        if need_new_part {
            if let Some(last) = parts.last() {
                events.extend(part_done_events(&id, index, parts.len() - 1, last));
            }
            parts.push(Part {
                refusal,
                text: String::new(),
            });
            events.push(EventKind::ContentPartAdded {
                item_id: id.clone(),
                output_index: index,
                content_index: parts.len() - 1,
                part: content_of(refusal, String::new()),
            });
        }
        let content_index = parts.len() - 1;
        if let Some(part) = parts.last_mut() {
            part.text.push_str(&delta);
        }
        events.push(if refusal {
            EventKind::RefusalDelta {
                item_id: id,
                output_index: index,
                content_index,
                delta,
            }
        } else {
            EventKind::OutputTextDelta {
                item_id: id,
                output_index: index,
                content_index,
                delta,
                logprobs: Vec::new(),
            }
        });
        for kind in events {
            self.push(out, kind);
        }
    }

    pub(super) fn reasoning(&mut self, delta: String, out: &mut Vec<StreamEvent>) {
        if delta.is_empty() {
            return;
        }
        self.round
            .reasoning
            .get_or_insert_with(String::new)
            .push_str(&delta);
        self.open_reasoning(out);
        let summary = self.reasoning_display.summary;
        let Open::Reasoning {
            index, id, text, ..
        } = &mut self.current
        else {
            return;
        };
        text.push_str(&delta);
        let kind = if summary {
            EventKind::ReasoningSummaryTextDelta {
                item_id: id.clone(),
                output_index: *index,
                summary_index: 0,
                delta,
            }
        } else {
            EventKind::ReasoningTextDelta {
                item_id: id.clone(),
                output_index: *index,
                content_index: 0,
                delta,
            }
        };
        self.push(out, kind);
    }

    /// Opens a reasoning item (its part included) unless one is open.
    pub(super) fn open_reasoning(&mut self, out: &mut Vec<StreamEvent>) {
        self.saw_output = true;
        if !matches!(self.current, Open::Reasoning { .. }) {
            self.close_current(out);
            let index = self.open_slot();
            let id = self.next_id("rs");
            let summary = self.reasoning_display.summary;
            self.push(
                out,
                EventKind::OutputItemAdded {
                    output_index: index,
                    item: OutputItem::Reasoning(ReasoningItem {
                        id: Some(id.clone()),
                        summary: Vec::new(),
                        content: (!summary).then(Vec::new),
                        encrypted_content: None,
                        status: None,
                    }),
                },
            );
            // OpenAI opens the part before its first delta (openai-node's stream helper
            // looks the part up by index and throws "missing content at index 0" without it).
            let part_added = if summary {
                EventKind::ReasoningSummaryPartAdded {
                    item_id: id.clone(),
                    output_index: index,
                    summary_index: 0,
                    part: SummaryPart::summary_text(String::new()),
                }
            } else {
                EventKind::ContentPartAdded {
                    item_id: id.clone(),
                    output_index: index,
                    content_index: 0,
                    part: OutputContent::ReasoningText {
                        text: String::new(),
                    },
                }
            };
            self.push(out, part_added);
            self.current = Open::Reasoning {
                index,
                id,
                text: String::new(),
                signature: None,
                redacted: Vec::new(),
            };
        }
    }

    pub(super) fn close_current(&mut self, out: &mut Vec<StreamEvent>) {
        match std::mem::replace(&mut self.current, Open::None) {
            Open::None => {}
            Open::Reasoning {
                index,
                id,
                text,
                signature,
                redacted,
            } => {
                let state = ProviderState {
                    text: text.clone(),
                    signature,
                    redacted,
                    origin: None,
                };
                let encrypted_content = self.seal(&sealed_plaintext(&state));
                if state.is_signed() {
                    self.keep_state(state);
                }
                let item = if self.reasoning_display.summary {
                    let part = SummaryPart::summary_text(text.clone());
                    self.push(
                        out,
                        EventKind::ReasoningSummaryTextDone {
                            item_id: id.clone(),
                            output_index: index,
                            summary_index: 0,
                            text,
                        },
                    );
                    self.push(
                        out,
                        EventKind::ReasoningSummaryPartDone {
                            item_id: id.clone(),
                            output_index: index,
                            summary_index: 0,
                            part: part.clone(),
                        },
                    );
                    ReasoningItem {
                        id: Some(id),
                        summary: vec![part],
                        content: None,
                        encrypted_content,
                        status: None,
                    }
                } else {
                    self.push(
                        out,
                        EventKind::ReasoningTextDone {
                            item_id: id.clone(),
                            output_index: index,
                            content_index: 0,
                            text: text.clone(),
                        },
                    );
                    self.push(
                        out,
                        EventKind::ContentPartDone {
                            item_id: id.clone(),
                            output_index: index,
                            content_index: 0,
                            part: OutputContent::ReasoningText { text: text.clone() },
                        },
                    );
                    ReasoningItem {
                        id: Some(id),
                        summary: Vec::new(),
                        content: Some(vec![ReasoningContent::reasoning_text(text)]),
                        encrypted_content,
                        status: None,
                    }
                };
                self.done(index, OutputItem::Reasoning(item), out);
            }
            Open::Message { index, id, parts } => {
                if let Some(last) = parts.last() {
                    for kind in part_done_events(&id, index, parts.len() - 1, last) {
                        self.push(out, kind);
                    }
                }
                let content = parts
                    .into_iter()
                    .map(|p| content_of(p.refusal, p.text))
                    .collect();
                let item = OutputItem::Message(OutputMessage {
                    id,
                    status: self.message_status.to_owned(),
                    role: "assistant".to_owned(),
                    content,
                });
                self.done(index, item, out);
            }
        }
    }
}

impl Assembler {
    /// A signature or redacted reasoning from the upstream: it joins the open reasoning item;
    /// with none open, it opens an empty one when the request wants sealed reasoning (the blob
    /// carries it), else it is kept for the calls that follow.
    pub(super) fn provider_state(&mut self, state: ProviderState, out: &mut Vec<StreamEvent>) {
        if !matches!(self.current, Open::Reasoning { .. }) && self.reasoning_display.encrypted {
            self.open_reasoning(out);
        }
        if let Some(signature) = &state.signature {
            self.round.reasoning_signature = Some(signature.clone());
        }
        self.round
            .reasoning_redacted
            .extend(state.redacted.iter().cloned());
        match &mut self.current {
            Open::Reasoning {
                signature,
                redacted,
                ..
            } => {
                if state.signature.is_some() {
                    *signature = state.signature;
                }
                redacted.extend(state.redacted);
            }
            _ => self.keep_state(state),
        }
    }

    /// Keeps provider state for the calls that follow: merged into the last state no call took
    /// yet, else a new entry.
    pub(super) fn keep_state(&mut self, state: ProviderState) {
        match self.provider_states.last_mut() {
            Some(last) if self.state_open && last.call_ids.is_empty() => {
                if last.state.text.is_empty() {
                    last.state.text = state.text;
                }
                if state.signature.is_some() {
                    last.state.signature = state.signature;
                }
                last.state.redacted.extend(state.redacted);
            }
            _ => self.provider_states.push(ProviderStateEntry {
                call_ids: Vec::new(),
                state,
            }),
        }
        self.state_open = true;
    }

    /// A client call item became final: the provider state before it goes back with it.
    pub(super) fn state_for_call(&mut self, call_id: &str) {
        if self.state_open
            && let Some(last) = self.provider_states.last_mut()
        {
            last.call_ids.push(call_id.to_owned());
        }
    }
}

fn content_of(refusal: bool, text: String) -> OutputContent {
    if refusal {
        OutputContent::Refusal { refusal: text }
    } else {
        OutputContent::output_text(text)
    }
}

fn part_done_events(id: &str, index: usize, content_index: usize, part: &Part) -> [EventKind; 2] {
    let text_done = if part.refusal {
        EventKind::RefusalDone {
            item_id: id.to_owned(),
            output_index: index,
            content_index,
            refusal: part.text.clone(),
        }
    } else {
        EventKind::OutputTextDone {
            item_id: id.to_owned(),
            output_index: index,
            content_index,
            text: part.text.clone(),
            logprobs: Vec::new(),
        }
    };
    [
        text_done,
        EventKind::ContentPartDone {
            item_id: id.to_owned(),
            output_index: index,
            content_index,
            part: content_of(part.refusal, part.text.clone()),
        },
    ]
}
