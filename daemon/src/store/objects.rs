//! Content-addressed blobs (SPEC §3): `objects/ab/cdef…`, named by the SHA-256 of their content
//! and fanned out by its first byte so that no directory grows huge. An object is written once,
//! through a temporary file and a rename, so a crash leaves either no object or a whole one; it
//! is verified against its name whenever it is read back.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use super::{
    AtomicFile, Durability, FileMode, StoreError, TEMP_PREFIX, atomic_write, create_private_dir,
};

/// Files up to this size are hashed in memory before anything is written, so that storing a
/// duplicate costs no write at all; larger ones are streamed through a temporary file.
const IN_MEMORY_BYTES: u64 = 8 << 20;

/// Above this many unsynced objects one `syncfs` is cheaper than an fsync per object (about
/// 1.7 ms each on the test machine's disk).
#[cfg(target_os = "linux")]
const SYNCFS_ABOVE: usize = 16;

/// The SHA-256 of an object's content; shown and serialised as 64 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId([u8; 32]);

impl ObjectId {
    pub fn of(bytes: &[u8]) -> Self {
        Self::from_digest(Sha256::digest(bytes).as_slice())
    }

    /// The id a file's content would have, read in chunks: nothing is stored.
    pub fn of_file(path: &Path) -> Result<Self, StoreError> {
        let mut file = File::open(path).map_err(StoreError::io("read", path))?;
        let mut hasher = Sha256::new();
        copy_hashing(&mut file, &mut hasher, &mut io::sink())
            .map_err(StoreError::io("read", path))?;
        Ok(Self::from_digest(hasher.finalize().as_slice()))
    }

    fn from_digest(digest: &[u8]) -> Self {
        let mut bytes = [0; 32];
        bytes.copy_from_slice(digest);
        Self(bytes)
    }

    fn parse(hex_digits: &str) -> Option<Self> {
        let mut bytes = [0; 32];
        hex::decode_to_slice(hex_digits, &mut bytes).ok()?;
        Some(Self(bytes))
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "ObjectId({self})")
    }
}

impl Serialize for ObjectId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ObjectId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <&str>::deserialize(deserializer)?;
        Self::parse(text).ok_or_else(|| {
            serde::de::Error::custom(format!("`{text}` is not a SHA-256 in 64 hex digits"))
        })
    }
}

/// What a garbage collection freed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GcReport {
    pub removed_objects: usize,
    pub freed_bytes: u64,
}

/// One session's `objects/` directory.
#[derive(Debug)]
pub struct ObjectStore {
    dir: PathBuf,
    /// Objects renamed into place since the last `sync`: they survive a killed daemon already,
    /// a power cut only once synced.
    unsynced: Vec<PathBuf>,
}

impl ObjectStore {
    /// Nothing is created until the first object is stored, so a read-only home can still be
    /// read.
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            unsynced: Vec::new(),
        }
    }

    pub fn path_of(&self, id: &ObjectId) -> PathBuf {
        let hex_digits = id.to_string();
        self.dir.join(&hex_digits[..2]).join(&hex_digits[2..])
    }

    pub fn contains(&self, id: &ObjectId) -> bool {
        self.path_of(id).is_file()
    }

    /// Stores `bytes` unless an object with the same content exists already.
    pub fn put(&mut self, bytes: &[u8]) -> Result<ObjectId, StoreError> {
        let id = ObjectId::of(bytes);
        let path = self.path_of(&id);
        if path.is_file() {
            return Ok(id);
        }
        Self::fan_out_dir(&path)?;
        // Synced in a batch by `sync`, with the directory entries.
        atomic_write(&path, bytes, Durability::Unsynced)
            .map_err(|error| StoreError::io("store", &error.path)(error.source))?;
        self.unsynced.push(path);
        Ok(id)
    }

    /// Stores a file's content, streamed when it is large.
    pub fn put_file(&mut self, source: &Path) -> Result<ObjectId, StoreError> {
        let mut file = File::open(source).map_err(StoreError::io("read", source))?;
        let size = file
            .metadata()
            .map_err(StoreError::io("read", source))?
            .len();
        if size <= IN_MEMORY_BYTES {
            let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            file.read_to_end(&mut bytes)
                .map_err(StoreError::io("read", source))?;
            return self.put(&bytes);
        }
        create_private_dir(&self.dir).map_err(StoreError::io("create", &self.dir))?;
        let mut temp = temp_file_in(&self.dir)?;
        let mut hasher = Sha256::new();
        copy_hashing(&mut file, &mut hasher, temp.as_file_mut()).map_err(|error| {
            // Tell a full store from an unreadable workspace file.
            if error.kind() == io::ErrorKind::StorageFull {
                StoreError::io("write", temp.path())(error)
            } else {
                StoreError::io("read", source)(error)
            }
        })?;
        let id = ObjectId::from_digest(hasher.finalize().as_slice());
        let path = self.path_of(&id);
        if !path.is_file() {
            Self::fan_out_dir(&path)?;
            self.persist(temp, path)?;
        }
        Ok(id)
    }

    /// An object's content, checked against its name.
    pub fn get(&self, id: &ObjectId) -> Result<Vec<u8>, StoreError> {
        let path = self.path_of(id);
        let bytes = fs::read(&path).map_err(StoreError::io("read checkpoint object", &path))?;
        if ObjectId::of(&bytes) != *id {
            return Err(StoreError::DamagedObject { path });
        }
        Ok(bytes)
    }

    /// Makes every object stored since the last sync durable, with the directory entries that
    /// name them.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        if self.unsynced.is_empty() {
            return Ok(());
        }
        #[cfg(target_os = "linux")]
        if self.unsynced.len() > SYNCFS_ABOVE {
            let dir = File::open(&self.dir).map_err(StoreError::io("sync", &self.dir))?;
            rustix::fs::syncfs(&dir)
                .map_err(|errno| StoreError::io("sync", &self.dir)(errno.into()))?;
            self.unsynced.clear();
            return Ok(());
        }
        let mut dirs = BTreeSet::from([self.dir.clone()]);
        for path in &self.unsynced {
            match File::open(path).and_then(|file| file.sync_data()) {
                // Collected since it was stored: nothing left to make durable.
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                result => result.map_err(StoreError::io("sync", path))?,
            }
            dirs.extend(path.parent().map(Path::to_owned));
        }
        for dir in dirs {
            File::open(&dir)
                .and_then(|handle| handle.sync_all())
                .map_err(StoreError::io("sync", &dir))?;
        }
        self.unsynced.clear();
        Ok(())
    }

    /// Removes every object not in `keep`, and temporary files a crash left behind.
    pub fn retain(&mut self, keep: &HashSet<ObjectId>) -> Result<GcReport, StoreError> {
        let mut report = GcReport::default();
        let fan_outs = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(report),
            Err(error) => return Err(StoreError::io("list", &self.dir)(error)),
        };
        for fan_out in fan_outs {
            let fan_out = fan_out.map_err(StoreError::io("list", &self.dir))?;
            let fan_out_name = fan_out.file_name();
            let fan_out_name = fan_out_name.to_string_lossy();
            if fan_out_name.starts_with(TEMP_PREFIX) {
                remove_counting(&fan_out.path(), &mut report)?;
                continue;
            }
            if fan_out_name.len() != 2 || !fan_out.path().is_dir() {
                continue;
            }
            let objects =
                fs::read_dir(fan_out.path()).map_err(StoreError::io("list", &fan_out.path()))?;
            for object in objects {
                let object = object.map_err(StoreError::io("list", &fan_out.path()))?;
                let name = object.file_name();
                let name = name.to_string_lossy();
                let stale_temp = name.starts_with(TEMP_PREFIX);
                let unreferenced = ObjectId::parse(&format!("{fan_out_name}{name}"))
                    .is_some_and(|id| !keep.contains(&id));
                if stale_temp || unreferenced {
                    remove_counting(&object.path(), &mut report)?;
                }
            }
        }
        self.unsynced.retain(|path| path.exists());
        Ok(report)
    }

    /// Creates the fan-out directory an object goes in, and returns it.
    fn fan_out_dir(object: &Path) -> Result<&Path, StoreError> {
        let fan_out = object.parent().unwrap_or(Path::new("."));
        create_private_dir(fan_out).map_err(StoreError::io("create", fan_out))?;
        Ok(fan_out)
    }

    fn persist(&mut self, temp: AtomicFile, path: PathBuf) -> Result<(), StoreError> {
        // Synced in a batch by `sync`, with the directory entries.
        temp.commit(&path, Durability::Unsynced)
            .map_err(|error| StoreError::io("store", &error.path)(error.source))?;
        self.unsynced.push(path);
        Ok(())
    }
}

fn temp_file_in(dir: &Path) -> Result<AtomicFile, StoreError> {
    AtomicFile::new_in(dir, TEMP_PREFIX, FileMode::Private)
        .map_err(|error| StoreError::io("create a temporary file in", &error.path)(error.source))
}

fn copy_hashing(source: &mut File, hasher: &mut Sha256, sink: &mut impl Write) -> io::Result<()> {
    let mut buffer = vec![0; 1 << 16];
    loop {
        let read = match source.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        hasher.update(&buffer[..read]);
        sink.write_all(&buffer[..read])?;
    }
}

fn remove_counting(path: &Path, report: &mut GcReport) -> Result<(), StoreError> {
    let size = fs::symlink_metadata(path).map_or(0, |metadata| metadata.len());
    fs::remove_file(path).map_err(StoreError::io("remove", path))?;
    report.removed_objects += 1;
    report.freed_bytes += size;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files_under(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.path().is_dir() {
                files.extend(files_under(&entry.path()));
            } else {
                files.push(entry.path());
            }
        }
        files
    }

    #[test]
    fn objects_are_named_by_sha256_and_fanned_out_by_the_first_byte() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ObjectStore::new(dir.path().join("objects"));
        let id = store.put(b"hello\n").unwrap();
        let sha = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
        assert_eq!(id.to_string(), sha);
        let expected = dir.path().join("objects/58").join(&sha[2..]);
        assert_eq!(store.path_of(&id), expected);
        assert_eq!(fs::read(expected).unwrap(), b"hello\n");
        assert_eq!(store.get(&id).unwrap(), b"hello\n");
    }

    #[test]
    fn the_same_content_is_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ObjectStore::new(dir.path().join("objects"));
        let first = store.put(b"same").unwrap();
        let before = fs::metadata(store.path_of(&first))
            .unwrap()
            .modified()
            .unwrap();
        let source = dir.path().join("copy.txt");
        fs::write(&source, b"same").unwrap();
        assert_eq!(store.put(b"same").unwrap(), first);
        assert_eq!(store.put_file(&source).unwrap(), first);
        assert_eq!(files_under(&dir.path().join("objects")).len(), 1);
        assert_eq!(
            store.unsynced.len(),
            1,
            "a duplicate must not be written again"
        );
        let after = fs::metadata(store.path_of(&first))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(before, after);
    }

    #[test]
    fn large_files_are_streamed_and_deduplicated() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ObjectStore::new(dir.path().join("objects"));
        let big: Vec<u8> = (0..9 << 20).map(|index: u32| (index % 251) as u8).collect();
        let source = dir.path().join("big.bin");
        fs::write(&source, &big).unwrap();
        let id = store.put_file(&source).unwrap();
        assert_eq!(id, ObjectId::of(&big));
        assert_eq!(id, ObjectId::of_file(&source).unwrap());
        assert_eq!(store.put_file(&source).unwrap(), id);
        assert_eq!(store.get(&id).unwrap(), big);
        let names: Vec<_> = files_under(&dir.path().join("objects"));
        assert_eq!(names, vec![store.path_of(&id)], "no temporary file left");
    }

    #[test]
    fn a_damaged_object_is_detected_on_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ObjectStore::new(dir.path().join("objects"));
        let id = store.put(b"original").unwrap();
        fs::write(store.path_of(&id), b"tampered").unwrap();
        let error = store.get(&id).unwrap_err();
        assert!(matches!(error, StoreError::DamagedObject { .. }), "{error}");
        assert!(error.to_string().contains(&id.to_string()[2..]), "{error}");
    }

    #[test]
    fn retain_removes_unreferenced_objects_and_stale_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ObjectStore::new(dir.path().join("objects"));
        let kept = store.put(b"kept").unwrap();
        let dropped = store.put(b"dropped!").unwrap();
        let stale = store.path_of(&kept).with_file_name(".tmp-crashed");
        fs::write(&stale, b"partial").unwrap();
        let report = store.retain(&HashSet::from([kept])).unwrap();
        assert_eq!(report.removed_objects, 2);
        assert_eq!(report.freed_bytes, 8 + 7);
        assert!(store.contains(&kept));
        assert!(!store.contains(&dropped));
        assert!(!stale.exists());
        store.sync().unwrap();
    }

    #[test]
    fn ids_round_trip_through_json_as_hex() {
        let id = ObjectId::of(b"x");
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        assert_eq!(serde_json::from_str::<ObjectId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<ObjectId>("\"abc\"").is_err());
    }

    #[test]
    fn sync_makes_pending_objects_durable() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ObjectStore::new(dir.path().join("objects"));
        // Enough objects for one `syncfs` on Linux, then one object for the per-file path.
        for index in 0..20 {
            store.put(format!("object {index}").as_bytes()).unwrap();
        }
        store.sync().unwrap();
        assert!(store.unsynced.is_empty());
        store.put(b"one more").unwrap();
        store.sync().unwrap();
        assert!(store.unsynced.is_empty());
    }
}
