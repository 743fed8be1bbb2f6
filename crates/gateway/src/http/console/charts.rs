//! The console's charts, drawn as inline SVG on the server (no script, nothing fetched): the
//! tokens of each session turn with their cached share, and latency over time. Each chart has
//! a title and a description for screen readers; the page's table beside it holds the numbers.

use maud::{Markup, html};

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 200.0;
const LEFT: f64 = 56.0;
const BOTTOM: f64 = 24.0;
const TOP: f64 = 26.0;

/// One turn: its input tokens and the cached part of them.
pub(super) struct Turn {
    pub input: u64,
    pub cached: u64,
}

/// Bars of input tokens per turn, the cached part darker, and the cached share as a line.
pub(super) fn turns(title: &str, turns: &[Turn]) -> Markup {
    let most = turns.iter().map(|t| t.input).max().unwrap_or(0).max(1) as f64;
    let plot_w = WIDTH - LEFT - 8.0;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let slot = plot_w / turns.len().max(1) as f64;
    let bar = (slot * 0.7).max(1.0);
    let y = |tokens: f64| TOP + plot_h - tokens / most * plot_h;
    let share_y = |share: f64| TOP + plot_h - share * plot_h;
    let shares: Vec<String> = turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let share = if t.input == 0 {
                0.0
            } else {
                t.cached as f64 / t.input as f64
            };
            format!(
                "{:.1},{:.1}",
                LEFT + slot * i as f64 + slot / 2.0,
                share_y(share)
            )
        })
        .collect();
    let description = format!(
        "{} turns; the most input tokens in one turn: {}",
        turns.len(),
        most as u64
    );
    html! {
        svg.chart role="img" aria-labelledby="turns-title turns-desc"
            viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) width=(WIDTH) height=(HEIGHT) {
            title #turns-title { (title) }
            desc #turns-desc { (description) }
            (axes(most as u64, "tokens"))
            @for (i, t) in turns.iter().enumerate() {
                @let x = LEFT + slot * i as f64 + (slot - bar) / 2.0;
                rect x=(fmt(x)) y=(fmt(y(t.input as f64))) width=(fmt(bar))
                    height=(fmt(plot_h - (y(t.input as f64) - TOP))) fill="#93c5fd" {}
                rect x=(fmt(x)) y=(fmt(y(t.cached as f64))) width=(fmt(bar))
                    height=(fmt(plot_h - (y(t.cached as f64) - TOP))) fill="#1d4ed8" {}
                text x=(fmt(x + bar / 2.0)) y=(fmt(HEIGHT - 8.0)) font-size="11"
                    text-anchor="middle" fill="#1b1f24" { (i + 1) }
            }
            polyline points=(shares.join(" ")) fill="none" stroke="#b45309" stroke-width="2" {}
            text x=(fmt(WIDTH - 10.0)) y="14" font-size="11" text-anchor="end"
                fill="#1b1f24" { "dark: cached · line: cached share (top = 100%)" }
        }
    }
}

/// Latency of requests in the order they started, as a line with its points.
pub(super) fn latency(title: &str, values: &[f64]) -> Markup {
    let most = values.iter().copied().fold(0.0_f64, f64::max).max(1.0);
    let plot_w = WIDTH - LEFT - 8.0;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let step = plot_w / (values.len().max(2) - 1) as f64;
    let points: Vec<(f64, f64)> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (LEFT + step * i as f64, TOP + plot_h - v / most * plot_h))
        .collect();
    let line: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    let description = format!(
        "{} requests, oldest on the left; the slowest took {:.1} ms",
        values.len(),
        most
    );
    html! {
        svg.chart role="img" aria-labelledby="latency-title latency-desc"
            viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) width=(WIDTH) height=(HEIGHT) {
            title #latency-title { (title) }
            desc #latency-desc { (description) }
            (axes(most.ceil() as u64, "ms"))
            polyline points=(line.join(" ")) fill="none" stroke="#1d4ed8" stroke-width="2" {}
            @for (x, y) in &points {
                circle cx=(fmt(*x)) cy=(fmt(*y)) r="2.5" fill="#1d4ed8" {}
            }
        }
    }
}

/// The axes, with the top value and its unit.
fn axes(top: u64, unit: &str) -> Markup {
    let base = HEIGHT - BOTTOM;
    html! {
        line x1=(fmt(LEFT)) y1=(fmt(TOP)) x2=(fmt(LEFT)) y2=(fmt(base)) stroke="#4a5260" {}
        line x1=(fmt(LEFT)) y1=(fmt(base)) x2=(fmt(WIDTH - 8.0)) y2=(fmt(base)) stroke="#4a5260" {}
        text x=(fmt(LEFT - 4.0)) y=(fmt(TOP + 8.0)) font-size="11" text-anchor="end"
            fill="#1b1f24" { (top) }
        text x=(fmt(LEFT - 4.0)) y=(fmt(base)) font-size="11" text-anchor="end"
            fill="#1b1f24" { "0" }
        text x=(fmt(LEFT - 4.0)) y=(fmt(TOP + 22.0)) font-size="11" text-anchor="end"
            fill="#4a5260" { (unit) }
    }
}

fn fmt(value: f64) -> String {
    format!("{value:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_a_bar_pair_per_turn_and_its_share_line() {
        let svg = turns(
            "Tokens",
            &[
                Turn {
                    input: 100,
                    cached: 0,
                },
                Turn {
                    input: 200,
                    cached: 150,
                },
            ],
        )
        .into_string();
        assert_eq!(svg.matches("<rect").count(), 4);
        assert!(svg.contains("<polyline"));
        assert!(svg.contains("<title id=\"turns-title\">Tokens</title>"));
        let empty = latency("Latency", &[]).into_string();
        assert!(empty.contains("0 requests"));
    }
}
