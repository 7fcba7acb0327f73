//! The memory store (SPEC §3, §7): notes kept across sessions in `memory.db`, SQLite with an FTS5
//! index, written by `remember` and ranked by `recall`. One connection, owned by the store and
//! used only on the blocking pool, so no async worker ever waits on SQLite; it is opened at the
//! first use, so a daemon whose memory file is broken still starts and says why when asked.

mod rank;
mod schema;
mod vector;

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cwcode_protocol::{MemoryNote, MemoryScope, RecalledNote};
use rusqlite::{Connection, OptionalExtension, params};

use rank::Candidate;
pub use vector::Embedder;

/// Every file of the home is private (SPEC §3); SQLite gives its `-wal` and `-shm` files the
/// database file's mode.
const DB_FILE_MODE: u32 = 0o600;
/// How long a statement waits for a lock another process of the same file holds.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest note, in bytes: a note is a fact or a decision, not a document.
pub const MAX_NOTE_BYTES: usize = 4096;
pub const MAX_TAGS: usize = 8;
pub const MAX_TAG_CHARS: usize = 32;
pub const MAX_QUERY_BYTES: usize = 512;
pub const DEFAULT_RECALL: u32 = 5;
pub const MAX_RECALL: u32 = 20;
pub const DEFAULT_LIST: u32 = 50;
pub const MAX_LIST: u32 = 500;
/// The most notes the store keeps; past it `remember` asks for old ones to be deleted.
pub const MAX_NOTES: i64 = 100_000;
/// How many index matches per scope are ranked: the best BM25 matches, so a huge store costs a
/// bounded amount per recall.
const CANDIDATES_PER_SCOPE: i64 = 500;
/// How many of the newest notes per scope are compared by vector alone, for notes that share
/// no word with the query: a bounded scan, whatever the store's size.
const VECTOR_SCAN_PER_SCOPE: i64 = 5000;

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// Bad input; the message says what was wrong and what to do.
    #[error("{0}")]
    Invalid(String),
    #[error(
        "memory.db has schema version {found}, newer than the {known} this cwcode knows: \
         upgrade cwcode, or move the file away to start an empty memory"
    )]
    NewerSchema { found: u32, known: u32 },
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "memory holds {MAX_NOTES} notes, the most it keeps: delete old ones (`cwcode-cli memory ls`, `memory rm ID`)"
    )]
    Full,
    #[error("the memory database failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the memory task stopped: {0}")]
    Task(String),
}

/// A note to store.
#[derive(Debug, Clone)]
pub struct NewNote {
    pub text: String,
    pub tags: Vec<String>,
    pub workspace: String,
    pub session_id: Option<String>,
}

/// The store. Cheap to share: clone the `Arc`.
pub struct MemoryStore {
    path: PathBuf,
    connection: Arc<Mutex<Option<Connection>>>,
}

impl MemoryStore {
    /// A store on `path`; nothing is opened until the first call.
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            connection: Arc::new(Mutex::new(None)),
        }
    }

    /// Stores a note, with its vector when an `embedder` is given and answers.
    pub async fn remember(
        &self,
        note: NewNote,
        embedder: Option<&dyn Embedder>,
    ) -> Result<MemoryNote, MemoryError> {
        let note = validated(note)?;
        let embedding = match embedder {
            Some(embedder) => vector::embedding_of(embedder, &note.text)
                .await
                .map(|vector| (embedder.model().to_owned(), vector)),
            None => None,
        };
        self.with_connection(move |connection| insert(connection, note, embedding, now_ms()))
            .await
    }

    /// The notes best matching `query`: up to `limit` of `workspace`'s first, then the best of
    /// the others. With an `embedder`, similarity to the query's vector counts too.
    pub async fn recall(
        &self,
        query: &str,
        limit: Option<u32>,
        workspace: Option<String>,
        embedder: Option<&dyn Embedder>,
    ) -> Result<Vec<RecalledNote>, MemoryError> {
        let fts = checked_query(query)?;
        let limit = bounded_limit(limit, DEFAULT_RECALL, MAX_RECALL, "limit")?;
        let query_vector = match embedder {
            Some(embedder) => vector::embedding_of(embedder, query)
                .await
                .map(|vector| (embedder.model().to_owned(), vector)),
            None => None,
        };
        self.with_connection(move |connection| {
            let search = Search {
                fts: &fts,
                vector: query_vector
                    .as_ref()
                    .map(|(model, vector)| (model.as_str(), vector.as_slice())),
                limit,
                workspace: workspace.as_deref(),
                now_ms: now_ms(),
            };
            recall(connection, &search)
        })
        .await
    }

    /// The newest notes first, of one workspace or of all.
    pub async fn list(
        &self,
        workspace: Option<String>,
        limit: Option<u32>,
    ) -> Result<Vec<MemoryNote>, MemoryError> {
        let limit = bounded_limit(limit, DEFAULT_LIST, MAX_LIST, "limit")?;
        self.with_connection(move |connection| list(connection, workspace.as_deref(), limit))
            .await
    }

    /// Whether a note of that id existed.
    pub async fn delete(&self, id: i64) -> Result<bool, MemoryError> {
        self.with_connection(move |connection| delete(connection, id))
            .await
    }

    /// Runs `work` on the blocking pool with the one connection, opening it first if needed.
    async fn with_connection<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, MemoryError> + Send + 'static,
    ) -> Result<T, MemoryError> {
        let slot = Arc::clone(&self.connection);
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            // A panic while holding the lock leaves SQLite consistent (its transaction rolls
            // back), so the connection stays usable.
            let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
            let connection = match &mut *slot {
                Some(connection) => connection,
                empty => empty.insert(open(&path)?),
            };
            work(connection)
        })
        .await
        .map_err(|error| MemoryError::Task(error.to_string()))?
    }
}

/// Opens (creating it private) and migrates the database, in WAL mode so that readers and the
/// writer do not block each other.
fn open(path: &Path) -> Result<Connection, MemoryError> {
    let open_error = |source| MemoryError::Open {
        path: path.display().to_string(),
        source,
    };
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(DB_FILE_MODE)
        .open(path)
        .map_err(open_error)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(DB_FILE_MODE))
        .map_err(open_error)?;
    let mut connection = Connection::open(path)?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    let journal_mode: String =
        connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !journal_mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(%journal_mode, "memory.db is not in WAL mode");
    }
    // With WAL, NORMAL loses at most the last commits on power loss, never consistency.
    connection.pragma_update(None, "synchronous", "NORMAL")?;
    schema::migrate(&mut connection)?;
    Ok(connection)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
}

fn rfc3339(ms: i64) -> String {
    let time = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(time).to_string()
}

/// Trims and checks the note; tags are trimmed, deduplicated and kept in the given order.
fn validated(mut note: NewNote) -> Result<NewNote, MemoryError> {
    note.text = note.text.trim().to_owned();
    if note.text.is_empty() {
        return Err(MemoryError::Invalid(
            "the note is empty: give the text to remember".to_owned(),
        ));
    }
    if note.text.len() > MAX_NOTE_BYTES {
        return Err(MemoryError::Invalid(format!(
            "the note has {} bytes, more than the {MAX_NOTE_BYTES} a note may hold: keep the fact \
             itself, or split it into several notes",
            note.text.len()
        )));
    }
    let mut tags: Vec<String> = Vec::new();
    for tag in &note.tags {
        let tag = tag.trim().to_lowercase();
        if tag.is_empty() || tags.contains(&tag) {
            continue;
        }
        let allowed = |c: char| c.is_alphanumeric() || "-_./:".contains(c);
        if tag.chars().count() > MAX_TAG_CHARS || !tag.chars().all(allowed) {
            return Err(MemoryError::Invalid(format!(
                "tag `{tag}` is not a tag: use up to {MAX_TAG_CHARS} letters, digits and - _ . / :"
            )));
        }
        tags.push(tag);
    }
    if tags.len() > MAX_TAGS {
        return Err(MemoryError::Invalid(format!(
            "{} tags, more than the {MAX_TAGS} a note may have: keep the ones you would search for",
            tags.len()
        )));
    }
    note.tags = tags;
    if note.workspace.trim().is_empty() {
        return Err(MemoryError::Invalid(
            "the note has no workspace: give the absolute path it belongs to".to_owned(),
        ));
    }
    Ok(note)
}

fn checked_query(query: &str) -> Result<String, MemoryError> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(MemoryError::Invalid(format!(
            "the query has {} bytes, more than {MAX_QUERY_BYTES}: search with the few words that \
             matter",
            query.len()
        )));
    }
    rank::fts_query(query).ok_or_else(|| {
        MemoryError::Invalid(
            "the query has no words to search for: give words the note would contain".to_owned(),
        )
    })
}

fn bounded_limit(
    limit: Option<u32>,
    default: u32,
    max: u32,
    name: &str,
) -> Result<u32, MemoryError> {
    match limit {
        None => Ok(default),
        Some(0) => Err(MemoryError::Invalid(format!(
            "{name} is 0: ask for at least one note"
        ))),
        Some(limit) if limit > max => Err(MemoryError::Invalid(format!(
            "{name} {limit} is more than {max}: ask for at most {max} notes"
        ))),
        Some(limit) => Ok(limit),
    }
}

fn insert(
    connection: &mut Connection,
    note: NewNote,
    embedding: Option<(String, Vec<f32>)>,
    now_ms: i64,
) -> Result<MemoryNote, MemoryError> {
    let transaction = connection.transaction()?;
    let count: i64 = transaction.query_row("SELECT count(*) FROM notes", [], |row| row.get(0))?;
    if count >= MAX_NOTES {
        return Err(MemoryError::Full);
    }
    let created = rfc3339(now_ms);
    let tags_json = serde_json::to_string(&note.tags)
        .map_err(|error| MemoryError::Invalid(format!("cannot encode the tags: {error}")))?;
    let (embedding_model, embedding) = match embedding {
        Some((model, vector)) => (Some(model), Some(vector::to_blob(&vector))),
        None => (None, None),
    };
    transaction.execute(
        "INSERT INTO notes (text, tags, workspace, session_id, created, created_ms, embedding,
                            embedding_model)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            note.text,
            tags_json,
            note.workspace,
            note.session_id,
            created,
            now_ms,
            embedding,
            embedding_model
        ],
    )?;
    let id = transaction.last_insert_rowid();
    transaction.execute(
        "INSERT INTO notes_fts (rowid, text, tags) VALUES (?1, ?2, ?3)",
        params![id, note.text, note.tags.join(" ")],
    )?;
    transaction.commit()?;
    Ok(MemoryNote {
        id,
        text: note.text,
        tags: note.tags,
        workspace: note.workspace,
        session_id: note.session_id,
        created,
    })
}

const NOTE_COLUMNS: &str = "id, text, tags, workspace, session_id, created";

fn note_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<MemoryNote> {
    let tags: String = row.get(2)?;
    Ok(MemoryNote {
        id: row.get(0)?,
        text: row.get(1)?,
        // Written by this module as a JSON list; anything else reads as no tags.
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        workspace: row.get(3)?,
        session_id: row.get(4)?,
        created: row.get(5)?,
    })
}

fn note_by_id(connection: &Connection, id: i64) -> Result<Option<MemoryNote>, MemoryError> {
    Ok(connection
        .query_row(
            &format!("SELECT {NOTE_COLUMNS} FROM notes WHERE id = ?1"),
            [id],
            note_of,
        )
        .optional()?)
}

/// What one recall looks for.
struct Search<'a> {
    fts: &'a str,
    /// The query's vector and the model that made it.
    vector: Option<(&'a str, &'a [f32])>,
    limit: u32,
    workspace: Option<&'a str>,
    now_ms: i64,
}

/// Ranks the workspace's matches, then everyone else's, and keeps `limit` in that order.
fn recall(connection: &Connection, search: &Search<'_>) -> Result<Vec<RecalledNote>, MemoryError> {
    let scopes: Vec<(MemoryScope, &str)> = match search.workspace {
        Some(_) => vec![
            (MemoryScope::Workspace, "n.workspace = ?2"),
            (MemoryScope::Global, "n.workspace != ?2"),
        ],
        None => vec![(MemoryScope::Global, "?2 IS NULL")],
    };
    let mut recalled = Vec::new();
    for (scope, filter) in scopes {
        let candidates = candidates(connection, search, filter)?;
        let ranked = rank::rank(&candidates, search.vector.is_some(), search.now_ms);
        for (id, score) in ranked {
            if recalled.len() >= search.limit as usize {
                return Ok(recalled);
            }
            if let Some(note) = note_by_id(connection, id)? {
                recalled.push(RecalledNote { note, scope, score });
            }
        }
    }
    Ok(recalled)
}

/// The notes of one scope that may answer: the best word matches, and with a query vector the
/// newest notes close enough to it.
fn candidates(
    connection: &Connection,
    search: &Search<'_>,
    filter: &str,
) -> Result<Vec<Candidate>, MemoryError> {
    let similarity_to = |blob: Option<Vec<u8>>, model: Option<String>| {
        let (query_model, query_vector) = search.vector?;
        let blob = blob.filter(|_| model.as_deref() == Some(query_model))?;
        Some(vector::similarity(query_vector, &vector::from_blob(&blob)))
    };
    let mut by_id: BTreeMap<i64, Candidate> = BTreeMap::new();
    let mut words = connection.prepare_cached(&format!(
        "SELECT n.id, bm25(notes_fts), n.created_ms, n.embedding, n.embedding_model
         FROM notes_fts JOIN notes n ON n.id = notes_fts.rowid
         WHERE notes_fts MATCH ?1 AND {filter}
         ORDER BY bm25(notes_fts) LIMIT ?3"
    ))?;
    let mut rows = words.query(params![search.fts, search.workspace, CANDIDATES_PER_SCOPE])?;
    while let Some(row) = rows.next()? {
        let id = row.get(0)?;
        let candidate = Candidate {
            id,
            bm25: Some(row.get(1)?),
            similarity: similarity_to(row.get(3)?, row.get(4)?),
            created_ms: row.get(2)?,
        };
        by_id.insert(id, candidate);
    }
    if let Some((model, _)) = search.vector {
        let mut vectors = connection.prepare_cached(&format!(
            "SELECT n.id, n.created_ms, n.embedding FROM notes n
             WHERE n.embedding_model = ?1 AND {filter}
             ORDER BY n.id DESC LIMIT ?3"
        ))?;
        let mut rows = vectors.query(params![model, search.workspace, VECTOR_SCAN_PER_SCOPE])?;
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            if by_id.contains_key(&id) {
                continue;
            }
            let similarity = similarity_to(row.get(2)?, Some(model.to_owned()));
            if similarity.is_some_and(|similarity| similarity >= rank::MIN_SIMILARITY) {
                let candidate = Candidate {
                    id,
                    bm25: None,
                    similarity,
                    created_ms: row.get(1)?,
                };
                by_id.insert(id, candidate);
            }
        }
    }
    Ok(by_id.into_values().collect())
}

fn list(
    connection: &Connection,
    workspace: Option<&str>,
    limit: u32,
) -> Result<Vec<MemoryNote>, MemoryError> {
    let mut statement = connection.prepare_cached(&format!(
        "SELECT {NOTE_COLUMNS} FROM notes WHERE ?1 IS NULL OR workspace = ?1
         ORDER BY id DESC LIMIT ?2"
    ))?;
    let notes = statement
        .query_map(params![workspace, limit], note_of)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(notes)
}

fn delete(connection: &mut Connection, id: i64) -> Result<bool, MemoryError> {
    let transaction = connection.transaction()?;
    let deleted = transaction.execute("DELETE FROM notes WHERE id = ?1", [id])?;
    transaction.execute("DELETE FROM notes_fts WHERE rowid = ?1", [id])?;
    transaction.commit()?;
    Ok(deleted > 0)
}

#[cfg(test)]
mod tests;
