//! The checkpointer: a thread of the SQLite store with a connection of its own that copies the
//! WAL back into the database file, kicked by the writer (`writer`) every [`EVERY`] commits, so
//! that no commit a caller waits for runs a checkpoint and its `fsync`s.
//!
//! Not here: the writes themselves and the turn at writing the checkpointer shares with them
//! (`writer`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::StoreError;

/// Commits between two kicks of the checkpointer.
pub(crate) const EVERY: u64 = 64;
/// WAL pages past which a commit checkpoints by itself (SQLite's `wal_autocheckpoint`, 1,000
/// by default); every SQLite connection of the store is set so.
pub(crate) const BACKSTOP_PAGES: u32 = 10_000;

/// WAL frames (pages written) from which a checkpoint is finished between two batches.
const RESTART_FRAMES: i64 = 512;

/// One kick's checkpoint: the bulk of it beside the writer, then, once the WAL holds
/// `restart_frames` frames or more, the rest in this process's turn at writing, between two
/// batches.
///
/// Why the second part: SQLite starts the WAL again from its beginning only when a write
/// transaction begins with every frame already in the database. Under load the writer is
/// nearly always in a batch, so the first part, however often it ran, never found the WAL
/// whole and it grew until the backstop, where the writer's own commit ran the checkpoint,
/// its two `fsync`s included, while every caller waited (about 40 ms every second or two at S
/// c=16: the p99 was ten times the p50). In the turn, with no batch open, the second part
/// copies what was committed since the first (a few `fsync`ed pages, nothing when there is
/// none), and the next batch starts the WAL again: it stays about `restart_frames` pages long,
/// and the wait it costs a batch is a few milliseconds. A checkpoint that cannot finish (a
/// reader still on old frames) leaves the rest for the next kick; the backstop bounds the WAL
/// meanwhile.
fn cycle(conn: &Connection, gate: &tokio::sync::Mutex<()>, restart_frames: i64) {
    let Ok(frames) = checkpoint(conn) else {
        return;
    };
    if frames >= restart_frames {
        let _turn = gate.blocking_lock();
        let _ = checkpoint(conn);
    }
}

/// A `PRAGMA wal_checkpoint(PASSIVE)` (it waits for no lock and never blocks the writer): the
/// frames in the WAL when it ran.
fn checkpoint(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| row.get(1))
}

/// Starts the checkpointer: a thread with a connection of its own that copies the WAL back
/// into the database ([`cycle`]) each time the writer kicks it. With SQLite's automatic
/// checkpoint the commit that crossed 1,000 WAL pages ran the checkpoint and its `fsync`
/// itself, and the batch (and every batch queued behind it) waited: S's p99 at c=16 was 3.5 to
/// 6 times its p50, and 2 times with the checkpoints here. `gate` is this process's turn at
/// writing. Ends when the writer does (its kick sender dropped).
pub(crate) fn start(
    path: &Path,
    timeout: Duration,
    gate: Arc<tokio::sync::Mutex<()>>,
) -> Result<std::sync::mpsc::SyncSender<()>, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(timeout)?;
    // A checkpoint copies frames from the WAL to the file without the page cache.
    conn.pragma_update(None, "cache_size", -64)?;
    let (kick, kicks) = std::sync::mpsc::sync_channel::<()>(1);
    std::thread::Builder::new()
        .name("toolbridge-store-checkpoint".to_owned())
        .spawn(move || {
            while kicks.recv().is_ok() {
                cycle(&conn, &gate, RESTART_FRAMES);
            }
        })
        .map_err(|e| {
            StoreError::Unavailable(format!("cannot start the store's checkpointer: {e}"))
        })?;
    Ok(kick)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::tests::{open, response};
    use crate::{ResponseStore, StoreOptions, Tenant};
    use serde_json::json;

    /// Commits leave their pages in the WAL (no connection of the store checkpoints below the
    /// backstop); after `EVERY` of them the checkpointer copies them into the database file,
    /// which grows.
    #[tokio::test]
    async fn the_checkpointer_moves_the_wal_into_the_database_file() {
        let (store, dir) = open("checkpoint", StoreOptions::default()).await;
        let t = Tenant::named("team-a");
        let file = dir.join("store.db");
        let size = || std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        let before = size();
        for i in 0..EVERY + 2 {
            let mut r = response(&format!("resp_{i}"), "completed");
            r.output_items = vec![json!({"id": format!("out_{i}"), "text": "x".repeat(3000)})];
            store.put(&t, &r).await.unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while size() <= before && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            size() > before,
            "the database file stayed at {before} bytes"
        );
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Frames committed while the first part of a checkpoint ran (as the writer's batches do
    /// under load) are copied by the second, in the turn: the next write then starts the WAL
    /// again from its beginning. With the first part alone the WAL would keep every frame and
    /// go on growing.
    #[tokio::test]
    async fn a_checkpoint_past_the_threshold_is_finished_in_the_turn() {
        let (store, dir) = open("restart", StoreOptions::default()).await;
        let t = Tenant::named("team-a");
        for i in 0..20 {
            store
                .put(&t, &response(&format!("resp_{i}"), "completed"))
                .await
                .unwrap();
        }
        let file = dir.join("store.db");
        let gate = store.writer.clone().unwrap().gate();
        let turn = Arc::clone(&gate).lock_owned().await;
        // A write transaction begun before the checkpoint and committed during it.
        let raw = Connection::open(&file).unwrap();
        raw.busy_timeout(Duration::from_secs(5)).unwrap();
        raw.execute_batch(
            "BEGIN IMMEDIATE; \
             INSERT INTO toolbridge_instances (id, heartbeat_at) VALUES ('beside', 1)",
        )
        .unwrap();
        let cycle = std::thread::spawn({
            let (file, gate) = (file.clone(), Arc::clone(&gate));
            move || {
                let conn = Connection::open(&file).unwrap();
                cycle(&conn, &gate, 1);
            }
        });
        // The first part runs now, then the second waits for the turn.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!cycle.is_finished(), "the second part waits for the turn");
        raw.execute_batch("COMMIT").unwrap();
        drop(raw);
        drop(turn);
        tokio::task::spawn_blocking(move || cycle.join().unwrap())
            .await
            .unwrap();
        store
            .put(&t, &response("resp_next", "completed"))
            .await
            .unwrap();
        let frames = checkpoint(&Connection::open(&file).unwrap()).unwrap();
        assert!(
            frames < 20,
            "the WAL was not started again: {frames} frames after one write"
        );
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
