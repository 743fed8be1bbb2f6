//! The writer thread's statements: each prepared once and kept with the connection, and the
//! batch written through them in one transaction (with savepoints only when a record fails
//! part-way).
//!
//! Not here: the queue, the batching and the answering of callers (the parent, `writer`).

use rusqlite::types::ToSql;
use rusqlite::{Connection, Statement};

use super::Job;
use crate::responses::{DELETE_ITEMS, ITEM_ROWS, UPSERT, UPSERT_GUARDED, item_insert};
use crate::sql::unfinished;
use crate::{ResponseRecord, StoreError, Tenant};

/// The writer's statements, each prepared on its first use and kept as long as the connection:
/// a statement is found by its field, not by its text. (rusqlite's statement cache hashed the
/// whole SQL text with SipHash on every use and relinked its LRU list on the way in and out:
/// about 7 K instructions of the 72 K a record cost the writer.)
pub(super) struct Statements<'c> {
    conn: &'c Connection,
    /// `BEGIN IMMEDIATE`, `COMMIT`, `ROLLBACK`, `SAVEPOINT record`, `ROLLBACK TO record`,
    /// `RELEASE record`, at the indexes of [`Control`].
    control: [Option<Statement<'c>>; 6],
    upsert: Option<Statement<'c>>,
    upsert_guarded: Option<Statement<'c>>,
    delete_items: Option<Statement<'c>>,
    /// The item insert of `rows` rows at `rows - 1`.
    item_inserts: Vec<Option<Statement<'c>>>,
    /// Batches written again under savepoints (a record failed part-way), so far.
    pub(super) fallbacks: u64,
}

/// A transaction-control statement of [`Statements`].
#[derive(Clone, Copy)]
enum Control {
    Begin,
    Commit,
    Rollback,
    Savepoint,
    RollbackTo,
    Release,
}

impl Control {
    fn sql(self) -> &'static str {
        match self {
            // IMMEDIATE: the write lock is taken now (waiting out another writer's, under the
            // busy timeout) rather than at the first write.
            Self::Begin => "BEGIN IMMEDIATE",
            Self::Commit => "COMMIT",
            Self::Rollback => "ROLLBACK",
            Self::Savepoint => "SAVEPOINT record",
            Self::RollbackTo => "ROLLBACK TO record",
            Self::Release => "RELEASE record",
        }
    }
}

/// The statement in `slot`, prepared from `sql` on `conn` first if it is not yet.
fn prepared<'s, 'c>(
    slot: &'s mut Option<Statement<'c>>,
    conn: &'c Connection,
    sql: &str,
) -> Result<&'s mut Statement<'c>, StoreError> {
    match slot {
        Some(statement) => Ok(statement),
        None => Ok(slot.insert(conn.prepare(sql)?)),
    }
}

impl<'c> Statements<'c> {
    pub(super) fn new(conn: &'c Connection) -> Self {
        Self {
            conn,
            control: Default::default(),
            upsert: None,
            upsert_guarded: None,
            delete_items: None,
            item_inserts: (0..ITEM_ROWS).map(|_| None).collect(),
            fallbacks: 0,
        }
    }

    /// Runs a transaction-control statement.
    fn run(&mut self, control: Control) -> Result<(), StoreError> {
        let slot = &mut self.control[control as usize];
        prepared(slot, self.conn, control.sql())?.raw_execute()?;
        Ok(())
    }

    /// Writes a batch in one transaction, each record under its own savepoint (a record alone
    /// in its batch needs none: the transaction is its savepoint); the outcome of each record,
    /// valid once this returns `Ok` (the commit succeeded). On an error the transaction is
    /// rolled back.
    pub(super) fn commit(
        &mut self,
        instance: &str,
        batch: &[Job],
    ) -> Result<Vec<Result<bool, StoreError>>, StoreError> {
        self.run(Control::Begin)?;
        let outcome = self.write_batch(instance, batch);
        if outcome.is_err() && self.conn.is_autocommit() {
            // The transaction is gone already (a batch begun again failed to begin): its error
            // is the one to report, not a rollback's of nothing.
            return outcome;
        }
        let end = match &outcome {
            Ok(results) if batch.len() > 1 || matches!(results.first(), Some(Ok(true))) => {
                Control::Commit
            }
            _ => Control::Rollback,
        };
        match self.run(end) {
            Ok(()) => outcome,
            Err(e) => {
                if !self.conn.is_autocommit() {
                    let _ = self.run(Control::Rollback);
                }
                Err(e)
            }
        }
    }

    /// The records of a batch, inside its transaction.
    ///
    /// A record refused (a guarded write over a final response, an id of another tenant's)
    /// is refused by its upsert changing no row, before anything of it is written: it needs
    /// no rollback. So the batch is first written record after record with no savepoint, and
    /// only when a statement fails part-way through a record (an error from SQLite) is the
    /// transaction rolled back and the batch written again, each record under its own
    /// savepoint, so that the failure stays with its record. A savepoint was two statements
    /// a record and a copy of each page the record touched (SQLite's statement journal).
    fn write_batch(
        &mut self,
        instance: &str,
        batch: &[Job],
    ) -> Result<Vec<Result<bool, StoreError>>, StoreError> {
        if let [job] = batch {
            let result = self.write_record(instance, &job.tenant, &job.record, job.unless_final);
            return Ok(vec![result]);
        }
        let mut results = Vec::with_capacity(batch.len());
        for job in batch {
            match self.write_record(instance, &job.tenant, &job.record, job.unless_final) {
                result @ (Ok(_) | Err(StoreError::Conflict(_))) => results.push(result),
                Err(_) => break,
            }
        }
        if results.len() == batch.len() {
            return Ok(results);
        }
        self.fallbacks += 1;
        self.run(Control::Rollback)?;
        self.run(Control::Begin)?;
        results.clear();
        for job in batch {
            self.run(Control::Savepoint)?;
            let result = self.write_record(instance, &job.tenant, &job.record, job.unless_final);
            if !matches!(result, Ok(true)) {
                self.run(Control::RollbackTo)?;
            }
            self.run(Control::Release)?;
            results.push(result);
        }
        Ok(results)
    }

    /// [`crate::responses::write_record`] on the writer's connection, with the same SQL and
    /// the same outcomes: `Ok(true)` written; `Ok(false)` a guarded write refused (the response
    /// is final already, or another tenant's); [`StoreError::Conflict`] an id of another
    /// tenant's. Those two come from the upsert changing no row, before anything is written;
    /// any other error may come part-way through the record, and the caller rolls back.
    fn write_record(
        &mut self,
        instance: &str,
        t: &Tenant,
        r: &ResponseRecord,
        unless_final: bool,
    ) -> Result<bool, StoreError> {
        let sql = numbered();
        let owner = unfinished(&r.status).then_some(instance);
        let tenant = t.name();
        let body = r.stored_body();
        let upsert = if unless_final {
            prepared(&mut self.upsert_guarded, self.conn, &sql.upsert_guarded)?
        } else {
            prepared(&mut self.upsert, self.conn, &sql.upsert)?
        };
        let written = execute(
            upsert,
            &[
                &r.id,
                &r.created_at,
                &r.status,
                &r.model,
                &r.previous_response_id,
                &r.expires_at,
                &body,
                &owner,
                &tenant,
            ],
        )?;
        match (written, unless_final) {
            (0, true) => return Ok(false),
            (0, false) => return Err(StoreError::Conflict(r.id.clone())),
            _ => {}
        }
        let delete = prepared(&mut self.delete_items, self.conn, &sql.delete_items)?;
        execute(delete, &[&r.id, &tenant])?;
        let items: Vec<_> = r.items().collect();
        let mut values: Vec<&dyn ToSql> = Vec::with_capacity(2 + 4 * ITEM_ROWS);
        for chunk in items.chunks(ITEM_ROWS) {
            values.clear();
            values.push(&r.id);
            values.push(&tenant);
            for (kind, position, item_id, body) in chunk {
                values.extend_from_slice(&[kind as &dyn ToSql, position, item_id, body]);
            }
            let (Some(slot), Some(text)) = (
                self.item_inserts.get_mut(chunk.len() - 1),
                sql.item_inserts.get(chunk.len() - 1),
            ) else {
                continue;
            };
            execute(prepared(slot, self.conn, text)?, &values)?;
        }
        Ok(true)
    }
}

/// The SQL sqlx runs, for rusqlite: `$N` placeholders written `?N`, which SQLite numbers `N`
/// (it numbers `$N` names by first appearance instead), so values bind by position.
struct Numbered {
    upsert: String,
    upsert_guarded: String,
    delete_items: String,
    /// The item insert of `rows` rows at `rows - 1`.
    item_inserts: Vec<String>,
}

fn numbered() -> &'static Numbered {
    static SQL: std::sync::LazyLock<Numbered> = std::sync::LazyLock::new(|| {
        let question = |sql: &str| sql.replace('$', "?");
        Numbered {
            upsert: question(UPSERT),
            upsert_guarded: question(UPSERT_GUARDED),
            delete_items: question(DELETE_ITEMS),
            item_inserts: (1..=ITEM_ROWS)
                .map(|rows| question(item_insert(rows)))
                .collect(),
        }
    });
    &SQL
}

/// Runs `statement` with `values` bound to `?1`, `?2`, …; the rows it changed.
fn execute(statement: &mut Statement<'_>, values: &[&dyn ToSql]) -> Result<usize, StoreError> {
    if statement.parameter_count() != values.len() {
        return Err(StoreError::Corrupt(format!(
            "a write has {} values for {} parameters",
            values.len(),
            statement.parameter_count()
        )));
    }
    let run = |statement: &mut Statement<'_>| -> rusqlite::Result<usize> {
        for (index, value) in values.iter().enumerate() {
            statement.raw_bind_parameter(index + 1, value)?;
        }
        statement.raw_execute()
    };
    let changed = run(statement);
    // SQLite keeps its copy of each bound value until the next binding: a held statement
    // would keep the last body (up to the store's largest response) for as long as it lives.
    statement.clear_bindings();
    Ok(changed?)
}
