//! The layout of `memory.db` and its migrations, versioned with `PRAGMA user_version`: version N
//! means the first N migrations ran. Migrations are only ever appended.

use rusqlite::Connection;

use super::MemoryError;

/// Each migration brings the schema from its index to the next version.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: notes, and a full-text index over their text and tags whose rowid is the note's id.
    "CREATE TABLE notes (
         id INTEGER PRIMARY KEY,
         text TEXT NOT NULL,
         tags TEXT NOT NULL,
         workspace TEXT NOT NULL,
         session_id TEXT,
         created TEXT NOT NULL,
         created_ms INTEGER NOT NULL
     );
     CREATE INDEX notes_by_workspace ON notes (workspace, id);
     CREATE VIRTUAL TABLE notes_fts USING fts5 (text, tags, tokenize = 'porter unicode61');",
    // 2: an embedding per note (little-endian f32s) and the model that made it.
    "ALTER TABLE notes ADD COLUMN embedding BLOB;
     ALTER TABLE notes ADD COLUMN embedding_model TEXT;",
];

/// The version this build writes.
pub(super) const CURRENT_VERSION: u32 = MIGRATIONS.len() as u32;

/// Runs the migrations the database has not seen, each in its own transaction with its version
/// bump, so a crash leaves it at a version it fully has. A database from a newer cwcode is
/// refused rather than read with a schema this build does not know.
pub(super) fn migrate(connection: &mut Connection) -> Result<(), MemoryError> {
    let found = version(connection)?;
    if found > CURRENT_VERSION {
        return Err(MemoryError::NewerSchema {
            found,
            known: CURRENT_VERSION,
        });
    }
    for (done, migration) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let transaction = connection.transaction()?;
        transaction.execute_batch(migration)?;
        transaction.pragma_update(None, "user_version", done as u32 + 1)?;
        transaction.commit()?;
    }
    Ok(())
}

pub(super) fn version(connection: &Connection) -> Result<u32, MemoryError> {
    Ok(connection.query_row("PRAGMA user_version", [], |row| row.get(0))?)
}
