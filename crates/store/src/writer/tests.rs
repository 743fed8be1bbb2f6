//! Tests of the writer: batches, refusals, the turn, the relay, the deadline.

use super::*;
use crate::{ResponseStore, SqlStore, StoreOptions, StoredResponse};
use serde_json::json;

pub(crate) fn response(id: &str, status: &str) -> StoredResponse {
    StoredResponse {
        id: id.to_owned(),
        created_at: 1,
        status: status.to_owned(),
        model: "m".to_owned(),
        previous_response_id: None,
        expires_at: None,
        response: json!({"id": id, "status": status}),
        input_items: vec![json!({"id": format!("in_{id}"), "type": "message"})],
        output_items: vec![json!({"id": format!("out_{id}"), "type": "message"})],
    }
}

pub(crate) async fn open(name: &str, options: StoreOptions) -> (SqlStore, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("toolbridge-writer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("store.db").display());
    (SqlStore::open_with(&url, options).await.unwrap(), dir)
}

/// Two tenants, `team-a` and `team-b`, and what a batch's refusals meet: `team-b`'s
/// `resp_b` (a conflict for `team-a`) and `team-a`'s final `resp_final` (a guarded write
/// over it is refused).
async fn seed_refusals(store: &SqlStore) -> (Tenant, Tenant) {
    let (a, b) = (Tenant::named("team-a"), Tenant::named("team-b"));
    store
        .put(&b, &response("resp_b", "completed"))
        .await
        .unwrap();
    store
        .put(&a, &response("resp_final", "completed"))
        .await
        .unwrap();
    (a, b)
}

/// While SQLite's write lock is held elsewhere, every write below is queued: once it is
/// released they share at most two transactions (the writer may have taken the first one
/// alone before it met the lock), and the conflict and the refused guarded write inside a
/// batch fail alone.
#[tokio::test]
async fn writes_queued_together_commit_as_one_batch_and_a_failure_stays_alone() {
    let (store, dir) = open("batch", StoreOptions::default()).await;
    let (a, b) = seed_refusals(&store).await;
    let writer = store.writer.clone().unwrap();
    let before = writer.batches();
    let ids: Vec<String> = (0..40).map(|i| format!("resp_{i}")).collect();
    let records: Vec<StoredResponse> = ids.iter().map(|id| response(id, "completed")).collect();
    let conflict = response("resp_b", "failed");
    let late = response("resp_final", "in_progress");
    let held = store.writes().begin_with("BEGIN IMMEDIATE").await.unwrap();
    let release = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.rollback().await.unwrap();
    };
    let (puts, conflicted, guarded, ()) = tokio::join!(
        futures::future::join_all(records.iter().map(|r| store.put(&a, r))),
        store.put(&a, &conflict),
        store.put_unless_final(&a, &late),
        release,
    );
    let batches = writer.batches() - before;
    assert!(
        (1..=2).contains(&batches),
        "42 writes in {batches} transactions"
    );
    assert!(puts.iter().all(Result::is_ok), "{puts:?}");
    assert_eq!(conflicted.unwrap_err().code(), "store_conflict");
    assert!(!guarded.unwrap(), "a final response is not overwritten");
    for id in &ids {
        let got = store.get(&a, id).await.unwrap().unwrap();
        assert_eq!(got.output_items.len(), 1);
    }
    let kept = store.get(&b, "resp_b").await.unwrap().unwrap();
    assert_eq!(
        kept.status, "completed",
        "another tenant's response is untouched"
    );
    let final_ = store.get(&a, "resp_final").await.unwrap().unwrap();
    assert_eq!(final_.status, "completed");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A batch is written with no savepoint while its records are written or refused whole (a
/// conflict, a refused guarded write); a record failing part-way (here a trigger refuses its
/// items after its response row is written) makes the batch start again under savepoints,
/// and the failure stays with its record: none of it is kept, the rest of the batch is.
#[tokio::test]
async fn a_record_failing_part_way_is_rolled_back_alone() {
    let (store, dir) = open("fallback", StoreOptions::default()).await;
    let (a, b) = seed_refusals(&store).await;
    sqlx::query(
        "CREATE TRIGGER refuse_bad BEFORE INSERT ON toolbridge_items \
         WHEN NEW.response_id = 'resp_bad' BEGIN SELECT RAISE(ABORT, 'refused'); END",
    )
    .execute(store.writes())
    .await
    .unwrap();
    let conn = Connection::open(dir.join("store.db")).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    let mut statements = Statements::new(&conn);
    let job = |tenant: &Tenant, id: &str, status: &str, unless_final: bool| Job {
        tenant: tenant.clone(),
        record: ResponseRecord::from_stored(&response(id, status)).unwrap(),
        unless_final,
        done: oneshot::channel().0,
    };
    let outcomes = |results: Vec<Result<bool, StoreError>>| -> Vec<String> {
        results
            .into_iter()
            .map(|r| match r {
                Ok(written) => written.to_string(),
                Err(e) => e.code().to_owned(),
            })
            .collect()
    };

    let whole = [
        job(&a, "resp_1", "completed", false),
        job(&a, "resp_b", "failed", false),
        job(&a, "resp_final", "in_progress", true),
        job(&a, "resp_2", "completed", false),
    ];
    let results = statements.commit("i", &whole).unwrap();
    assert_eq!(
        outcomes(results),
        ["true", "store_conflict", "false", "true"]
    );
    assert_eq!(statements.fallbacks, 0, "refusals need no savepoint");

    let part_way = [
        job(&a, "resp_3", "completed", false),
        job(&a, "resp_bad", "completed", false),
        job(&a, "resp_4", "completed", false),
    ];
    let results = statements.commit("i", &part_way).unwrap();
    let codes = outcomes(results);
    assert_eq!(codes[0], "true");
    assert_ne!(codes[1], "true");
    assert_eq!(codes[2], "true");
    assert_eq!(statements.fallbacks, 1);
    drop(statements);
    drop(conn);

    for id in ["resp_1", "resp_2", "resp_3", "resp_4"] {
        let got = store.get(&a, id).await.unwrap().unwrap();
        assert_eq!(
            (got.input_items.len(), got.output_items.len()),
            (1, 1),
            "{id}"
        );
    }
    assert!(
        store.get(&a, "resp_bad").await.unwrap().is_none(),
        "the row written before the failure is rolled back with it"
    );
    assert_eq!(
        store.get(&b, "resp_b").await.unwrap().unwrap().status,
        "completed"
    );
    assert_eq!(
        store.get(&a, "resp_final").await.unwrap().unwrap().status,
        "completed"
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The batch less each guarded start whose final version (same tenant, same id) is in it,
/// before or after; the rest keep their order.
#[test]
fn superseded_takes_the_starts_beside_their_final_versions() {
    let job = |tenant: &str, id: &str, status: &str, unless_final: bool| Job {
        tenant: Tenant::named(tenant),
        record: ResponseRecord::from_stored(&response(id, status)).unwrap(),
        unless_final,
        done: oneshot::channel().0,
    };
    let mut batch = vec![
        job("a", "resp_x", "in_progress", true),
        job("a", "resp_x", "completed", false),
        job("a", "resp_y", "completed", true),
        job("a", "resp_y", "in_progress", true),
        job("a", "resp_alone", "in_progress", true),
        job("a", "resp_z", "in_progress", false),
        job("a", "resp_z", "failed", false),
        job("b", "resp_x", "in_progress", true),
        job("a", "resp_q", "queued", true),
        job("a", "resp_q", "in_progress", true),
    ];
    let key = |j: &Job| {
        (
            j.tenant.name().to_owned(),
            j.record.id().to_owned(),
            j.record.status.clone(),
        )
    };
    let taken: Vec<_> = superseded(&mut batch).iter().map(key).collect();
    let t = |tenant: &str, id: &str, status: &str| {
        (tenant.to_owned(), id.to_owned(), status.to_owned())
    };
    assert_eq!(
        taken,
        [
            t("a", "resp_x", "in_progress"),
            t("a", "resp_y", "in_progress")
        ]
    );
    let kept: Vec<_> = batch.iter().map(key).collect();
    assert_eq!(
        kept,
        [
            t("a", "resp_x", "completed"),
            t("a", "resp_y", "completed"),
            t("a", "resp_alone", "in_progress"),
            t("a", "resp_z", "in_progress"),
            t("a", "resp_z", "failed"),
            t("b", "resp_x", "in_progress"),
            t("a", "resp_q", "queued"),
            t("a", "resp_q", "in_progress"),
        ]
    );
    let mut none = vec![job("a", "resp_x", "completed", false)];
    assert!(superseded(&mut none).is_empty());
    assert_eq!(none.len(), 1);
}

/// Waits until `ready` holds (polled), for at most ten seconds.
async fn until(what: &str, ready: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Queued together, a guarded write of an unfinished response whose final version is in
/// the same batch (before it or after it) is not written, and is answered as refused; the
/// final version is stored. One with no final version beside it is written as before.
#[tokio::test]
async fn a_start_queued_with_its_final_version_is_not_written() {
    let (store, dir) = open("supersede", StoreOptions::default()).await;
    let t = Tenant::named("team-a");
    let first = response("resp_first", "completed");
    let (start_x, final_x) = (
        response("resp_x", "in_progress"),
        response("resp_x", "completed"),
    );
    let (start_y, final_y) = (
        response("resp_y", "in_progress"),
        response("resp_y", "completed"),
    );
    let alone = response("resp_alone", "in_progress");
    let writer = store.writer.clone().unwrap();
    let queued = || QUEUE - writer.queue.capacity();
    let before = writer.batches();
    let turn = store.write_turn().await.unwrap();
    // The first write is taken alone and waits for the turn; the others are queued behind
    // it, in this order (`biased`: polled in order), and the turn is given back once they
    // all are: they make one batch.
    let rest = async {
        until("the writer takes the first write", || queued() == 0).await;
        // And stops looking for more: it waits for the turn.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let writes: Vec<futures::future::BoxFuture<'_, Result<bool, StoreError>>> = vec![
            Box::pin(store.put_unless_final(&t, &start_x)),
            Box::pin(async { store.put(&t, &final_x).await.map(|()| true) }),
            Box::pin(async { store.put(&t, &final_y).await.map(|()| true) }),
            Box::pin(store.put_unless_final(&t, &start_y)),
            Box::pin(store.put_unless_final(&t, &alone)),
        ];
        let release = async {
            until("the five writes are queued", || queued() == 5).await;
            drop(turn);
        };
        tokio::join!(biased; futures::future::join_all(writes), release).0
    };
    let (first, rest) = tokio::join!(biased; store.put(&t, &first), rest);
    first.unwrap();
    assert_eq!(writer.batches() - before, 2);
    let outcomes: Vec<bool> = rest.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        outcomes,
        [false, true, true, false, true],
        "each start beside its final version is refused (x's, queued first, would have \
         been written), the one alone is written"
    );
    for id in ["resp_x", "resp_y"] {
        let got = store.get(&t, id).await.unwrap().unwrap();
        assert_eq!(got.status, "completed");
        assert_eq!(got.input_items.len(), 1);
    }
    let alone = store.get(&t, "resp_alone").await.unwrap().unwrap();
    assert_eq!(alone.status, "in_progress");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// While another write holds this process's turn, a batch waits for it (no race for
/// SQLite's lock, no busy handler's sleep); once the turn is given back, the write commits.
/// A batch's outcomes reach their callers through a running relay, and directly when there
/// is none, when it is behind (full) or when its runtime has gone (closed).
#[tokio::test]
async fn outcomes_reach_their_callers_through_the_relay_or_without_it() {
    fn outcome(value: bool) -> (Outcome, oneshot::Receiver<Result<bool, StoreError>>) {
        let (done, heard) = oneshot::channel();
        ((done, Ok(value)), heard)
    }
    let running = start_relay().unwrap();
    let (full, _held) = mpsc::channel::<Vec<Outcome>>(1);
    full.try_send(Vec::new()).unwrap();
    let (closed, gone) = mpsc::channel::<Vec<Outcome>>(1);
    drop(gone);
    for relay in [Some(&running), Some(&full), Some(&closed), None] {
        let (first, heard_first) = outcome(true);
        let (second, heard_second) = outcome(false);
        answer(relay, vec![first, second]);
        assert!(heard_first.await.unwrap().unwrap());
        assert!(!heard_second.await.unwrap().unwrap());
    }
}

#[tokio::test]
async fn a_batch_waits_for_the_turn_of_another_write() {
    let (store, dir) = open("turn", StoreOptions::default()).await;
    let t = Tenant::named("team-a");
    let turn = store.write_turn().await.unwrap();
    let record = response("resp_turn", "completed");
    {
        let mut put = std::pin::pin!(store.put(&t, &record));
        let early = tokio::time::timeout(Duration::from_millis(200), &mut put).await;
        assert!(early.is_err(), "committed while another write had the turn");
        drop(turn);
        put.await.unwrap();
    }
    assert!(store.get(&t, "resp_turn").await.unwrap().is_some());
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_file_of_a_store_url_is_read_as_sqlx_reads_it() {
    use std::path::PathBuf;
    assert_eq!(
        sqlite_file("sqlite:///var/lib/tb/store.db?mode=rwc"),
        Some(PathBuf::from("/var/lib/tb/store.db"))
    );
    assert_eq!(
        sqlite_file("sqlite://toolbridge.db"),
        Some(PathBuf::from("toolbridge.db"))
    );
    assert_eq!(
        sqlite_file("sqlite:data/my%20store.db"),
        Some(PathBuf::from("data/my store.db"))
    );
    assert_eq!(sqlite_file("sqlite::memory:"), None);
    assert_eq!(
        sqlite_file("sqlite://shared.db?mode=memory&cache=shared"),
        None
    );
    assert_eq!(sqlite_file("postgres://localhost/db"), None);
}

/// Items go in multi-row inserts of at most 16 rows: 40 items take three, in order.
#[tokio::test]
async fn more_items_than_one_insert_holds_keep_their_order() {
    let (store, dir) = open("items", StoreOptions::default()).await;
    let t = Tenant::named("team-a");
    let mut long = response("resp_long", "completed");
    long.input_items = (0..40)
        .map(|i| json!({"id": format!("in_{i}"), "n": i}))
        .collect();
    store.put(&t, &long).await.unwrap();
    assert_eq!(store.get(&t, "resp_long").await.unwrap().unwrap(), long);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// With SQLite's write lock held by another connection (sqlx's write connection, in an
/// open `BEGIN IMMEDIATE`), the writer cannot begin: every caller, more than the queue
/// holds, is answered `store_unavailable` within its deadline; once the lock is free the
/// next write goes through.
#[tokio::test]
async fn a_stuck_writer_fails_every_caller_within_the_deadline() {
    let options = StoreOptions {
        acquire_timeout: Duration::from_millis(150),
        timeout: Duration::from_millis(300),
        circuit_failures: 0,
        circuit_cooldown: Duration::from_millis(10),
    };
    let (store, dir) = open("stuck", options).await;
    let t = Tenant::named("team-a");
    let held = store.writes().begin_with("BEGIN IMMEDIATE").await.unwrap();
    let records: Vec<StoredResponse> = (0..QUEUE + MAX_BATCH + 8)
        .map(|i| response(&format!("resp_{i}"), "completed"))
        .collect();
    let started = std::time::Instant::now();
    let outcomes = futures::future::join_all(records.iter().map(|r| store.put(&t, r))).await;
    assert!(started.elapsed() < Duration::from_secs(5), "bounded waits");
    for outcome in &outcomes {
        assert_eq!(outcome.as_ref().unwrap_err().code(), "store_unavailable");
    }
    held.rollback().await.unwrap();
    store
        .put(&t, &response("resp_after", "completed"))
        .await
        .unwrap();
    assert!(store.get(&t, "resp_after").await.unwrap().is_some());
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
