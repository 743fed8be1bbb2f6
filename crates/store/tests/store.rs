//! The store suite, run against SQLite (a temporary file) and against the PostgreSQL server on
//! 127.0.0.1:5432 (a fresh database per run; `TOOLBRIDGE_TEST_POSTGRES_URL` names another admin
//! URL). PostgreSQL absent: the test says it skipped, except on CI, where it fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use serde_json::json;
use sqlx::Connection;
use toolbridge_store::{Order, Page, ResponseStore, SqlStore, StoreError, StoredResponse, Tenant};

fn response(id: &str, previous: Option<&str>, status: &str) -> StoredResponse {
    StoredResponse {
        id: id.to_owned(),
        created_at: 1_700_000_000,
        status: status.to_owned(),
        model: "m".to_owned(),
        previous_response_id: previous.map(str::to_owned),
        expires_at: None,
        response: json!({"id": id, "object": "response", "status": status, "output": [{"id": format!("msg_{id}"), "type": "message"}]}),
        input_items: (0..5)
            .map(|i| json!({"id": format!("in_{id}_{i}"), "type": "message", "role": "user", "content": format!("turn {i}")}))
            .collect(),
        output_items: vec![json!({"id": format!("msg_{id}"), "type": "message", "role": "assistant", "content": "ok"})],
    }
}

async fn suite(store: &SqlStore, url: &str) {
    let t = Tenant::named("team-a");
    // Put, get, replace.
    let first = response("resp_a", None, "completed");
    store.put(&t, &first).await.unwrap();
    assert_eq!(store.get(&t, "resp_a").await.unwrap().unwrap(), first);
    let mut updated = first.clone();
    updated.status = "failed".to_owned();
    updated.output_items.clear();
    store.put(&t, &updated).await.unwrap();
    assert_eq!(store.get(&t, "resp_a").await.unwrap().unwrap(), updated);
    store.put(&t, &first).await.unwrap();
    assert!(store.get(&t, "resp_missing").await.unwrap().is_none());

    // Chains, oldest first; missing links and cycles are errors.
    store
        .put(&t, &response("resp_b", Some("resp_a"), "completed"))
        .await
        .unwrap();
    store
        .put(&t, &response("resp_c", Some("resp_b"), "completed"))
        .await
        .unwrap();
    let chain: Vec<String> = store
        .chain(&t, "resp_c", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(chain, ["resp_a", "resp_b", "resp_c"]);
    // Each link comes whole, with its own input and output items in order.
    let whole = store.chain(&t, "resp_c", 10).await.unwrap();
    for link in &whole {
        assert_eq!(Some(link), store.get(&t, &link.id).await.unwrap().as_ref());
    }
    assert!(!whole[1].input_items.is_empty() && !whole[1].output_items.is_empty());
    assert_eq!(store.chain(&t, "resp_a", 1).await.unwrap().len(), 1);
    assert!(matches!(
        store.chain(&t, "resp_c", 2).await,
        Err(StoreError::TooDeep(2))
    ));
    store
        .put(&t, &response("resp_orphan", Some("resp_gone"), "completed"))
        .await
        .unwrap();
    let err = store.chain(&t, "resp_orphan", 10).await.unwrap_err();
    assert_eq!(err.code(), "previous_response_not_found");
    store
        .put(&t, &response("resp_x", Some("resp_y"), "completed"))
        .await
        .unwrap();
    store
        .put(&t, &response("resp_y", Some("resp_x"), "completed"))
        .await
        .unwrap();
    assert!(matches!(
        store.chain(&t, "resp_x", 10).await,
        Err(StoreError::Cycle(_))
    ));
    // The links alone: the same walk and the same errors.
    let links = store.chain_links(&t, "resp_c", 10).await.unwrap();
    let ids: Vec<&str> = links.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(ids, ["resp_a", "resp_b", "resp_c"]);
    assert_eq!(links[2].status, "completed");
    assert!(matches!(
        store.chain_links(&t, "resp_c", 2).await,
        Err(StoreError::TooDeep(2))
    ));
    assert!(matches!(
        store.chain_links(&t, "resp_orphan", 10).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.chain_links(&t, "resp_x", 10).await,
        Err(StoreError::Cycle(_))
    ));

    // Input items: pages in both orders, `after`, `has_more`.
    let page = |after: Option<&str>, limit, order| Page {
        after: after.map(str::to_owned),
        limit,
        order,
    };
    let ids = |p: toolbridge_store::ItemPage| -> (Vec<String>, bool) {
        (
            p.items
                .iter()
                .map(|i| i["id"].as_str().unwrap().to_owned())
                .collect(),
            p.has_more,
        )
    };
    let p = store
        .input_items(&t, "resp_a", &page(None, 2, Order::Asc))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        ids(p),
        (
            vec!["in_resp_a_0".to_owned(), "in_resp_a_1".to_owned()],
            true
        )
    );
    let p = store
        .input_items(&t, "resp_a", &page(Some("in_resp_a_1"), 10, Order::Asc))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ids(p).0, ["in_resp_a_2", "in_resp_a_3", "in_resp_a_4"]);
    let p = store
        .input_items(&t, "resp_a", &page(None, 2, Order::Desc))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        ids(p),
        (
            vec!["in_resp_a_4".to_owned(), "in_resp_a_3".to_owned()],
            true
        )
    );
    let p = store
        .input_items(&t, "resp_a", &page(Some("in_resp_a_1"), 10, Order::Desc))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ids(p), (vec!["in_resp_a_0".to_owned()], false));
    assert!(
        store
            .input_items(&t, "resp_missing", &page(None, 2, Order::Asc))
            .await
            .unwrap()
            .is_none()
    );

    // Items by id, input or output.
    let found = store
        .items_by_id(
            &t,
            &[
                "msg_resp_b".to_owned(),
                "in_resp_c_2".to_owned(),
                "nope".to_owned(),
            ],
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found["msg_resp_b"]["role"], "assistant");
    assert_eq!(found["in_resp_c_2"]["content"], "turn 2");

    // Delete removes the response and its items.
    assert!(store.delete(&t, "resp_b").await.unwrap());
    assert!(!store.delete(&t, "resp_b").await.unwrap());
    assert!(
        store
            .items_by_id(&t, &["msg_resp_b".to_owned()])
            .await
            .unwrap()
            .is_empty()
    );

    // Conversations: created with items, appended to, paged, deleted.
    let conversation = toolbridge_store::Conversation {
        id: "conv_1".to_owned(),
        created_at: 5,
        metadata: json!({"topic": "bikes"}),
    };
    store
        .create_conversation(
            &t,
            &conversation,
            &[json!({"id": "ci_0", "type": "message", "content": "zero"})],
        )
        .await
        .unwrap();
    assert_eq!(
        store.get_conversation(&t, "conv_1").await.unwrap().unwrap(),
        conversation
    );
    assert!(
        store
            .append_conversation_items(
                &t,
                "conv_1",
                &[json!({"id": "ci_1"}), json!({"id": "ci_2"})]
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .append_conversation_items(&t, "conv_nope", &[json!({})])
            .await
            .unwrap()
    );
    let all = store
        .conversation_items(&t, "conv_1", &page(None, 100, Order::Asc))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ids(all).0, ["ci_0", "ci_1", "ci_2"]);
    let newest = store
        .conversation_items(&t, "conv_1", &page(None, 1, Order::Desc))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ids(newest), (vec!["ci_2".to_owned()], true));
    assert!(store.delete_conversation(&t, "conv_1").await.unwrap());
    assert!(
        store
            .get_conversation(&t, "conv_1")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .conversation_items(&t, "conv_1", &page(None, 5, Order::Asc))
            .await
            .unwrap()
            .is_none()
    );

    // A background run finishing after a cancel does not undo it.
    store
        .put(&t, &response("resp_bg", None, "in_progress"))
        .await
        .unwrap();
    let cancelled = store.cancel(&t, "resp_bg").await.unwrap().unwrap();
    assert_eq!(cancelled.status, "cancelled");
    assert_eq!(cancelled.response["status"], "cancelled");
    assert!(
        !store
            .put_unless_final(&t, &response("resp_bg", None, "completed"))
            .await
            .unwrap()
    );
    assert_eq!(
        store.get(&t, "resp_bg").await.unwrap().unwrap().status,
        "cancelled"
    );
    assert!(
        store
            .put_unless_final(&t, &response("resp_fresh", None, "completed"))
            .await
            .unwrap()
    );
    store
        .put(&t, &response("resp_q", None, "queued"))
        .await
        .unwrap();
    assert!(
        store
            .put_unless_final(&t, &response("resp_q", None, "completed"))
            .await
            .unwrap()
    );
    assert_eq!(
        store.get(&t, "resp_q").await.unwrap().unwrap().status,
        "completed"
    );
    assert!(store.cancel(&t, "resp_nope").await.unwrap().is_none());

    // Runs a live process is producing are left alone; a process that starts after they were
    // left behind fails them, body included.
    store
        .put(&t, &response("resp_running", None, "in_progress"))
        .await
        .unwrap();
    store
        .put(&t, &response("resp_queued", None, "queued"))
        .await
        .unwrap();
    store.heartbeat(1_000).await.unwrap();
    assert_eq!(
        store.fail_interrupted(1_000).await.unwrap(),
        0,
        "its own runs are alive"
    );
    let later = 1_000 + toolbridge_store::LEASE_SECS + 1;
    let restarted = SqlStore::open(url).await.unwrap();
    restarted.heartbeat(later).await.unwrap();
    assert_eq!(restarted.fail_interrupted(later).await.unwrap(), 2);
    let running = store.get(&t, "resp_running").await.unwrap().unwrap();
    assert_eq!(running.status, "failed");
    assert_eq!(running.response["status"], "failed");
    assert_eq!(running.response["error"]["code"], "server_error");
    // This process's own orphans (unfinished here, no longer running here) are failed; the
    // ones still live, or created after the cut, are left alone.
    for id in ["resp_orphan", "resp_live"] {
        store
            .put(&t, &response(id, None, "in_progress"))
            .await
            .unwrap();
    }
    let live = |id: &str| id == "resp_live";
    assert_eq!(store.fail_orphans(1_700_000_000, &live).await.unwrap(), 0);
    assert_eq!(store.fail_orphans(1_700_000_001, &live).await.unwrap(), 1);
    let orphan = store.get(&t, "resp_orphan").await.unwrap().unwrap();
    assert_eq!(orphan.status, "failed");
    assert_eq!(orphan.response["error"]["code"], "server_error");
    assert_eq!(
        store.get(&t, "resp_live").await.unwrap().unwrap().status,
        "in_progress"
    );
    assert_eq!(
        restarted
            .fail_orphans(1_700_000_001, &|_| false)
            .await
            .unwrap(),
        0,
        "another process's runs are not its orphans"
    );
    let mut old = response("resp_old", None, "completed");
    old.expires_at = Some(10);
    store.put(&t, &old).await.unwrap();
    assert_eq!(store.purge_expired(11).await.unwrap(), 1);
    assert!(store.get(&t, "resp_old").await.unwrap().is_none());
    assert!(
        store.get(&t, "resp_a").await.unwrap().is_some(),
        "no expiry, kept"
    );

    // Concurrent writers and readers.
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (store, t) = (store.clone(), t.clone());
        tasks.push(tokio::spawn(async move {
            let id = format!("resp_par_{i}");
            store
                .put(&t, &response(&id, None, "completed"))
                .await
                .unwrap();
            store.get(&t, &id).await.unwrap().unwrap().id
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap(), format!("resp_par_{i}"));
    }

    tenants(store).await;
    images_kept_once(store, url).await;
}

/// Issue 22: an image's base64 `result` is stored once — in its item row, not in the response
/// body as well — and every read gives it back whole; another tenant gets nothing of it.
async fn images_kept_once(store: &SqlStore, url: &str) {
    use toolbridge_store::ResponseRecord;
    let t = Tenant::named("team-img");
    let image = "iVBORw0KGgo".repeat(1000);
    let item = json!({"id": "ig_1", "type": "image_generation_call", "status": "completed", "result": image});
    let body = json!({"id": "resp_img", "object": "response", "created_at": 1, "status": "completed",
                      "model": "m", "output": [item, {"id": "msg_img", "type": "message", "result": "short"}]});
    let echoed = json!({"id": "ig_0", "type": "image_generation_call", "result": image});
    let record =
        ResponseRecord::from_json(body.to_string(), std::slice::from_ref(&echoed), None).unwrap();
    assert!(
        record.size() < 3 * image.len(),
        "the record counts the image twice, not three times"
    );
    store.put_record(&t, record).await.unwrap();

    let got = store.get(&t, "resp_img").await.unwrap().unwrap();
    assert_eq!(got.response, body, "GET gives the body whole");
    assert_eq!(got.output_items[0], item);
    let page = Page {
        after: None,
        limit: 10,
        order: Order::Asc,
    };
    let inputs = store
        .input_items(&t, "resp_img", &page)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(inputs.items, vec![echoed]);
    let by_id = store.items_by_id(&t, &["ig_1".to_owned()]).await.unwrap();
    assert_eq!(by_id["ig_1"], item);
    let chain = store.chain(&t, "resp_img", 4).await.unwrap();
    assert_eq!(chain[0].response, body);
    assert!(
        store
            .get(&Tenant::named("team-b"), "resp_img")
            .await
            .unwrap()
            .is_none()
    );

    // In the tables: the body holds no copy; the output image is in one item row.
    let holding = |sql: &'static str| {
        let (url, image) = (url.to_owned(), image.clone());
        async move {
            let mut conn = sqlx::AnyConnection::connect(&url).await.unwrap();
            sqlx::query(sql)
                .bind("resp_img")
                .fetch_all(&mut conn)
                .await
                .unwrap()
                .iter()
                .filter(|row| sqlx::Row::get::<String, _>(*row, 0).contains(&image))
                .count()
        }
    };
    assert_eq!(
        holding("SELECT body FROM toolbridge_responses WHERE id = $1").await,
        0
    );
    assert_eq!(
        holding("SELECT body FROM toolbridge_items WHERE response_id = $1 AND kind = 'output'")
            .await,
        1
    );

    // A stored response written again (a cancel, a background update) keeps it once too.
    let mut again = got.clone();
    again.status = "incomplete".to_owned();
    store.put(&t, &again).await.unwrap();
    assert_eq!(
        store.get(&t, "resp_img").await.unwrap().unwrap().response,
        body
    );
    assert_eq!(
        holding("SELECT body FROM toolbridge_responses WHERE id = $1").await,
        0
    );
}

/// Another tenant finds nothing of team-a's, by any call, and cannot change it; an admin reads
/// across tenants and writes only as itself; the open gateway's tenant is one more tenant.
async fn tenants(store: &SqlStore) {
    let a = Tenant::named("team-a");
    let b = Tenant::named("team-b");
    let admin = Tenant::named("ops").reading_all();
    let open = Tenant::open();
    let page = Page {
        after: None,
        limit: 10,
        order: Order::Asc,
    };
    store
        .put(&a, &response("resp_ta1", None, "completed"))
        .await
        .unwrap();
    store
        .put(&a, &response("resp_ta2", Some("resp_ta1"), "in_progress"))
        .await
        .unwrap();
    for other in [&b, &open] {
        assert!(store.get(other, "resp_ta1").await.unwrap().is_none());
        assert!(
            store
                .input_items(other, "resp_ta1", &page)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            store
                .items_by_id(other, &["in_resp_ta1_0".to_owned()])
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store.chain(other, "resp_ta2", 10).await.unwrap_err().code(),
            "previous_response_not_found"
        );
        assert!(!store.delete(other, "resp_ta1").await.unwrap());
        assert!(store.cancel(other, "resp_ta2").await.unwrap().is_none());
        // Another tenant's id is neither overwritten nor finalised.
        assert!(matches!(
            store
                .put(other, &response("resp_ta1", None, "failed"))
                .await,
            Err(StoreError::Conflict(_))
        ));
        assert!(
            !store
                .put_unless_final(other, &response("resp_ta2", None, "completed"))
                .await
                .unwrap()
        );
    }
    // A chain whose older link is another tenant's is cut there.
    store
        .put(&b, &response("resp_tb1", Some("resp_ta1"), "completed"))
        .await
        .unwrap();
    assert_eq!(
        store.chain(&b, "resp_tb1", 10).await.unwrap_err().code(),
        "previous_response_not_found"
    );
    assert_eq!(
        store
            .chain_links(&b, "resp_tb1", 10)
            .await
            .unwrap_err()
            .code(),
        "previous_response_not_found"
    );
    // The owner still has all of it, unchanged.
    let mine = store.get(&a, "resp_ta1").await.unwrap().unwrap();
    assert_eq!(mine, response("resp_ta1", None, "completed"));
    assert_eq!(store.chain(&a, "resp_ta2", 10).await.unwrap().len(), 2);
    assert_eq!(
        store.get(&a, "resp_ta2").await.unwrap().unwrap().status,
        "in_progress"
    );
    // The admin reads across tenants, but cancels and deletes only its own.
    assert_eq!(store.get(&admin, "resp_ta1").await.unwrap().unwrap(), mine);
    assert_eq!(store.chain(&admin, "resp_tb1", 10).await.unwrap().len(), 2);
    assert_eq!(
        store
            .input_items(&admin, "resp_ta1", &page)
            .await
            .unwrap()
            .unwrap()
            .items
            .len(),
        5
    );
    assert!(store.cancel(&admin, "resp_ta2").await.unwrap().is_none());
    assert!(!store.delete(&admin, "resp_ta1").await.unwrap());
    assert_eq!(
        store.cancel(&a, "resp_ta2").await.unwrap().unwrap().status,
        "cancelled"
    );

    // Conversations.
    let conversation = toolbridge_store::Conversation {
        id: "conv_ta".to_owned(),
        created_at: 1,
        metadata: json!({}),
    };
    store
        .create_conversation(
            &a,
            &conversation,
            &[json!({"id": "ci_1", "type": "message"})],
        )
        .await
        .unwrap();
    for other in [&b, &open] {
        assert!(
            store
                .get_conversation(other, "conv_ta")
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            store
                .conversation_items(other, "conv_ta", &page)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            !store
                .append_conversation_items(other, "conv_ta", &[json!({"id": "ci_x"})])
                .await
                .unwrap()
        );
        assert!(!store.delete_conversation(other, "conv_ta").await.unwrap());
    }
    assert!(
        !store
            .append_conversation_items(&admin, "conv_ta", &[json!({"id": "ci_y"})])
            .await
            .unwrap()
    );
    let items = store
        .conversation_items(&a, "conv_ta", &page)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(items.items, vec![json!({"id": "ci_1", "type": "message"})]);
    assert!(
        store
            .get_conversation(&admin, "conv_ta")
            .await
            .unwrap()
            .is_some()
    );
    assert!(store.delete_conversation(&a, "conv_ta").await.unwrap());
}

#[tokio::test]
async fn the_suite_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("toolbridge-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.db");
    let _ = std::fs::remove_file(&path);
    let url = format!("sqlite://{}", path.display());
    let store = SqlStore::open(&url).await.unwrap();
    suite(&store, &url).await;
    // Reopening the same file keeps the data and does not migrate twice.
    drop(store);
    let again = SqlStore::open(&url).await.unwrap();
    assert!(
        again
            .get(&Tenant::named("team-a"), "resp_a")
            .await
            .unwrap()
            .is_some()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_suite_on_postgres() {
    let admin = std::env::var("TOOLBRIDGE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    sqlx::any::install_default_drivers();
    let mut conn = match sqlx::AnyConnection::connect(&admin).await {
        Ok(c) => c,
        Err(e) if std::env::var("CI").is_ok_and(|v| !v.is_empty()) => {
            panic!("PostgreSQL is not reachable at {admin} on CI: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED the PostgreSQL store suite: {admin} is not reachable ({e})");
            return;
        }
    };
    let name = format!(
        "toolbridge_test_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            % 1_000_000_000
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .unwrap();
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap();
    let url = format!("{base}/{name}");
    let store = SqlStore::open(&url).await.unwrap();
    suite(&store, &url).await;
    drop(store);
    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut conn)
    .await;
}
