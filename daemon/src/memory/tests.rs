use std::os::unix::fs::PermissionsExt;

use super::*;

const DAY_MS: i64 = 86_400_000;
const NOW: i64 = 1_800_000_000_000;

fn note(text: &str, workspace: &str) -> NewNote {
    NewNote {
        text: text.to_owned(),
        tags: Vec::new(),
        workspace: workspace.to_owned(),
        session_id: None,
    }
}

/// `super::insert` without an embedding.
fn insert(
    connection: &mut Connection,
    note: NewNote,
    now_ms: i64,
) -> Result<MemoryNote, MemoryError> {
    super::insert(connection, note, None, now_ms)
}

/// `super::recall` by words alone.
fn recall(
    connection: &Connection,
    fts: &str,
    limit: u32,
    workspace: Option<&str>,
    now_ms: i64,
) -> Result<Vec<RecalledNote>, MemoryError> {
    let search = Search {
        fts,
        vector: None,
        limit,
        workspace,
        now_ms,
    };
    super::recall(connection, &search)
}

fn fresh() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let connection = open(&dir.path().join("memory.db")).unwrap();
    (dir, connection)
}

/// Fifty notes on as many topics, sharing common words with each other and with the query.
fn fifty_notes(connection: &mut Connection, workspace: &str) {
    let topics = [
        "database", "frontend", "deploy", "logging", "testing", "caching", "auth", "billing",
        "search", "email",
    ];
    for index in 0..50 {
        let topic = topics[index % topics.len()];
        let text = format!(
            "note {index}: the {topic} module uses the project conventions; see the {topic} docs \
             for how the team works on it"
        );
        insert(
            connection,
            validated(note(&text, workspace)).unwrap(),
            NOW - index as i64 * DAY_MS,
        )
        .unwrap();
    }
}

fn recalled_ids(recalled: &[RecalledNote]) -> Vec<i64> {
    recalled.iter().map(|recalled| recalled.note.id).collect()
}

#[test]
fn a_new_database_is_migrated_private_and_in_wal_mode() {
    let (dir, connection) = fresh();
    assert_eq!(
        schema::version(&connection).unwrap(),
        schema::CURRENT_VERSION
    );
    let mode: String = connection
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    for name in ["memory.db", "memory.db-wal", "memory.db-shm"] {
        let mode = std::fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name}");
    }
}

#[test]
fn notes_survive_reopening_and_a_newer_schema_is_refused() {
    let (dir, mut connection) = fresh();
    let path = dir.path().join("memory.db");
    insert(
        &mut connection,
        validated(note("kept across opens", "/w")).unwrap(),
        NOW,
    )
    .unwrap();
    drop(connection);

    let reopened = open(&path).unwrap();
    assert_eq!(
        list(&reopened, None, 10).unwrap()[0].text,
        "kept across opens"
    );
    reopened.pragma_update(None, "user_version", 99).unwrap();
    drop(reopened);

    let error = open(&path).unwrap_err();
    assert!(
        matches!(error, MemoryError::NewerSchema { found: 99, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("upgrade cwcode"), "{error}");
}

#[test]
fn an_unversioned_database_gets_every_migration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    Connection::open(&path).unwrap();
    let connection = open(&path).unwrap();
    assert_eq!(
        schema::version(&connection).unwrap(),
        schema::CURRENT_VERSION
    );
}

#[test]
fn the_right_note_ranks_first_among_fifty() {
    let (_dir, mut connection) = fresh();
    fifty_notes(&mut connection, "/w");
    let target = insert(
        &mut connection,
        validated(note(
            "The staging deploy needs the VPN: run `make tunnel` before `make deploy-staging`",
            "/w",
        ))
        .unwrap(),
        NOW - 40 * DAY_MS,
    )
    .unwrap();
    fifty_notes(&mut connection, "/w");

    let fts = checked_query("how do I deploy to staging?").unwrap();
    let recalled = recall(&connection, &fts, 5, Some("/w"), NOW).unwrap();

    assert_eq!(recalled[0].note.id, target.id, "{recalled:#?}");
    assert_eq!(recalled.len(), 5);
    assert!(
        recalled
            .windows(2)
            .all(|pair| pair[0].score >= pair[1].score)
    );
}

#[test]
fn between_equal_matches_the_newer_note_wins() {
    let (_dir, mut connection) = fresh();
    let old = insert(
        &mut connection,
        validated(note("use tabs in Makefiles", "/w")).unwrap(),
        NOW - 200 * DAY_MS,
    )
    .unwrap();
    let new = insert(
        &mut connection,
        validated(note("use tabs in Makefiles", "/w")).unwrap(),
        NOW - DAY_MS,
    )
    .unwrap();
    let fts = checked_query("makefiles tabs").unwrap();
    let recalled = recall(&connection, &fts, 5, Some("/w"), NOW).unwrap();
    assert_eq!(recalled_ids(&recalled), [new.id, old.id]);
}

#[test]
fn the_workspaces_notes_come_first_then_the_others() {
    let (_dir, mut connection) = fresh();
    let elsewhere = insert(
        &mut connection,
        validated(note(
            "postgres port 5433, postgres user app, postgres everywhere",
            "/other",
        ))
        .unwrap(),
        NOW,
    )
    .unwrap();
    let here = insert(
        &mut connection,
        validated(note("this project's postgres runs in docker", "/here")).unwrap(),
        NOW - 10 * DAY_MS,
    )
    .unwrap();
    let fts = checked_query("postgres").unwrap();

    let recalled = recall(&connection, &fts, 5, Some("/here"), NOW).unwrap();
    assert_eq!(recalled_ids(&recalled), [here.id, elsewhere.id]);
    assert_eq!(recalled[0].scope, MemoryScope::Workspace);
    assert_eq!(recalled[1].scope, MemoryScope::Global);

    let one = recall(&connection, &fts, 1, Some("/here"), NOW).unwrap();
    assert_eq!(recalled_ids(&one), [here.id]);

    let everywhere = recall(&connection, &fts, 5, None, NOW).unwrap();
    assert_eq!(recalled_ids(&everywhere), [elsewhere.id, here.id]);
    assert!(
        everywhere
            .iter()
            .all(|recalled| recalled.scope == MemoryScope::Global)
    );
}

#[test]
fn tags_are_searchable_normalised_and_kept() {
    let (_dir, mut connection) = fresh();
    let mut tagged = note("the release checklist lives in docs/RELEASE.md", "/w");
    tagged.tags = vec![
        " Release ".to_owned(),
        "release".to_owned(),
        "ci/cd".to_owned(),
    ];
    let stored = insert(&mut connection, validated(tagged).unwrap(), NOW).unwrap();
    assert_eq!(stored.tags, ["release", "ci/cd"]);

    let fts = checked_query("cd").unwrap();
    let recalled = recall(&connection, &fts, 5, Some("/w"), NOW).unwrap();
    assert_eq!(recalled[0].note, stored);
}

#[test]
fn deleted_notes_are_gone_from_list_and_recall() {
    let (_dir, mut connection) = fresh();
    let stored = insert(
        &mut connection,
        validated(note("forget me", "/w")).unwrap(),
        NOW,
    )
    .unwrap();
    assert!(delete(&mut connection, stored.id).unwrap());
    assert!(!delete(&mut connection, stored.id).unwrap());
    assert!(list(&connection, None, 10).unwrap().is_empty());
    let fts = checked_query("forget").unwrap();
    assert!(recall(&connection, &fts, 5, None, NOW).unwrap().is_empty());
}

#[test]
fn list_is_newest_first_and_filters_by_workspace() {
    let (_dir, mut connection) = fresh();
    for (text, workspace) in [("a", "/one"), ("b", "/two"), ("c", "/one")] {
        insert(
            &mut connection,
            validated(note(text, workspace)).unwrap(),
            NOW,
        )
        .unwrap();
    }
    let texts =
        |notes: Vec<MemoryNote>| notes.into_iter().map(|note| note.text).collect::<Vec<_>>();
    assert_eq!(
        texts(list(&connection, Some("/one"), 10).unwrap()),
        ["c", "a"]
    );
    assert_eq!(texts(list(&connection, None, 2).unwrap()), ["c", "b"]);
}

#[test]
fn out_of_bounds_input_is_refused_saying_what_to_do() {
    let refused = |note: NewNote| validated(note).unwrap_err().to_string();
    assert!(refused(note("   ", "/w")).contains("the note is empty"));
    assert!(refused(note(&"x".repeat(MAX_NOTE_BYTES + 1), "/w")).contains("split it"));
    assert!(refused(note("fact", "")).contains("no workspace"));
    let mut too_many = note("fact", "/w");
    too_many.tags = (0..=MAX_TAGS).map(|tag| format!("t{tag}")).collect();
    assert!(refused(too_many).contains("more than the 8"));
    let mut bad_tag = note("fact", "/w");
    bad_tag.tags = vec!["two words".to_owned()];
    assert!(refused(bad_tag).contains("tag `two words`"));
    assert!(validated(note(&"x".repeat(MAX_NOTE_BYTES), "/w")).is_ok());

    let query = |text: &str| checked_query(text).unwrap_err().to_string();
    assert!(query(&"word ".repeat(200)).contains("more than 512"));
    assert!(query("?!").contains("no words"));

    let limit = |limit| {
        bounded_limit(Some(limit), 5, MAX_RECALL, "limit")
            .unwrap_err()
            .to_string()
    };
    assert!(limit(0).contains("at least one"));
    assert!(limit(MAX_RECALL + 1).contains("at most 20"));
}

#[tokio::test]
async fn the_store_opens_on_first_use_and_serves_every_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let store = MemoryStore::new(path.clone());
    assert!(!path.exists());

    let mut new = note("the CI runs on two cores", "/w");
    new.session_id = Some("s1".to_owned());
    let stored = store.remember(new, None).await.unwrap();
    assert_eq!(stored.session_id.as_deref(), Some("s1"));
    let recalled = store
        .recall("cores", None, Some("/w".to_owned()), None)
        .await
        .unwrap();
    assert_eq!(recalled[0].note, stored);
    assert_eq!(
        store.list(None, None).await.unwrap(),
        std::slice::from_ref(&stored)
    );
    assert!(store.delete(stored.id).await.unwrap());
    assert!(matches!(
        store.recall("", None, None, None).await,
        Err(MemoryError::Invalid(_))
    ));
}

/// Words as vectors: each word (a few synonyms folded together) adds to one of 1024 dimensions, so
/// notes sharing meaning but not words come out close, as a real embedding model's would.
struct WordVectors {
    fails: bool,
}

impl Embedder for WordVectors {
    fn model(&self) -> &str {
        "word-vectors"
    }

    fn embed<'a>(
        &'a self,
        text: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Vec<f32>, String>> {
        Box::pin(async move {
            if self.fails {
                return Err("503 from the embeddings endpoint".to_owned());
            }
            let mut vector = vec![0.0_f32; 1024];
            for word in text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|word| !word.is_empty())
            {
                let word = word.to_lowercase();
                let word = match word.as_str() {
                    "kitten" | "feline" | "cats" => "cat",
                    other => other,
                };
                let bucket = word
                    .bytes()
                    .fold(7_usize, |hash, byte| hash * 31 + byte as usize)
                    % 1024;
                vector[bucket] += 1.0;
            }
            Ok(vector)
        })
    }
}

#[tokio::test]
async fn with_embeddings_a_note_is_found_by_meaning_as_well_as_words() {
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::new(dir.path().join("memory.db"));
    let embedder = WordVectors { fails: false };
    for index in 0..20 {
        let text = format!("build step {index} runs the linter and then the tests");
        store
            .remember(note(&text, "/w"), Some(&embedder))
            .await
            .unwrap();
    }
    let cat = store
        .remember(
            note("a cat sleeps on the office keyboard", "/w"),
            Some(&embedder),
        )
        .await
        .unwrap();

    let by_meaning = store
        .recall("kitten", None, Some("/w".to_owned()), Some(&embedder))
        .await
        .unwrap();
    assert_eq!(by_meaning[0].note, cat, "{by_meaning:#?}");
    assert_eq!(by_meaning.len(), 1, "{by_meaning:#?}");

    let by_words = store
        .recall("kitten", None, Some("/w".to_owned()), None)
        .await
        .unwrap();
    assert!(by_words.is_empty(), "{by_words:#?}");
}

#[tokio::test]
async fn a_failing_embeddings_endpoint_leaves_words_to_do_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryStore::new(dir.path().join("memory.db"));
    let failing = WordVectors { fails: true };
    let stored = store
        .remember(note("the cat is called Tom", "/w"), Some(&failing))
        .await
        .unwrap();
    let recalled = store
        .recall("cat", None, None, Some(&failing))
        .await
        .unwrap();
    assert_eq!(recalled[0].note, stored);
}

#[test]
fn a_version_one_database_is_migrated_keeping_its_notes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let old = Connection::open(&path).unwrap();
    old.execute_batch(schema::MIGRATIONS[0]).unwrap();
    old.pragma_update(None, "user_version", 1).unwrap();
    old.execute(
        "INSERT INTO notes (text, tags, workspace, session_id, created, created_ms)
         VALUES ('from version one', '[]', '/w', NULL, '2026-01-01T00:00:00.000Z', 0)",
        [],
    )
    .unwrap();
    drop(old);

    let connection = open(&path).unwrap();
    assert_eq!(
        schema::version(&connection).unwrap(),
        schema::CURRENT_VERSION
    );
    let notes = list(&connection, None, 10).unwrap();
    assert_eq!(notes[0].text, "from version one");
    let embedding: Option<Vec<u8>> = connection
        .query_row("SELECT embedding FROM notes", [], |row| row.get(0))
        .unwrap();
    assert_eq!(embedding, None);
}
