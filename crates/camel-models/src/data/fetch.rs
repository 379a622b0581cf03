//! The known data sets, and downloading and verifying them.
//!
//! [`fetch_file`] downloads into a temporary file beside the destination while hashing it,
//! and renames it into place only after the SHA-256 matches, so an interrupted or corrupt
//! download never leaves a file under the final name. Each URL of a set's list (canonical first,
//! then mirrors) is tried in turn.

use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// One file of a data set, with its size and SHA-256.
#[derive(Clone, Copy, Debug)]
pub struct KnownFile {
    /// File name inside the set's folder.
    pub name: &'static str,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256, lowercase hex.
    pub sha256: &'static str,
}

/// A data set camel knows by name.
#[derive(Clone, Copy, Debug)]
pub struct KnownSet {
    /// Name, also the folder under the data dir.
    pub name: &'static str,
    /// One line on what it is.
    pub about: &'static str,
    /// Whether the repository carries it (`datasets/`).
    pub committed: bool,
    /// Base URLs, canonical first, then mirrors; a file's URL is base + file name.
    pub urls: &'static [&'static str],
    /// Its files; empty when camel pins no checksum for the set and so does not fetch it.
    pub files: &'static [KnownFile],
    /// Why the set cannot be fetched, when `files` is empty.
    pub note: &'static str,
    /// The folder its one archive (a `.tar.gz` among `files`) unpacks to inside the set's
    /// folder, or empty when the files are used as they are.
    pub unpacks_to: &'static str,
}

const MNIST_FILES: [KnownFile; 4] = [
    KnownFile {
        name: "train-images-idx3-ubyte.gz",
        bytes: 9_912_422,
        sha256: "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    },
    KnownFile {
        name: "train-labels-idx1-ubyte.gz",
        bytes: 28_881,
        sha256: "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    },
    KnownFile {
        name: "t10k-images-idx3-ubyte.gz",
        bytes: 1_648_877,
        sha256: "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    },
    KnownFile {
        name: "t10k-labels-idx1-ubyte.gz",
        bytes: 4_542,
        sha256: "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    },
];

const FASHION_FILES: [KnownFile; 4] = [
    KnownFile {
        name: "train-images-idx3-ubyte.gz",
        bytes: 26_421_880,
        sha256: "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
    },
    KnownFile {
        name: "train-labels-idx1-ubyte.gz",
        bytes: 29_515,
        sha256: "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
    },
    KnownFile {
        name: "t10k-images-idx3-ubyte.gz",
        bytes: 4_422_102,
        sha256: "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
    },
    KnownFile {
        name: "t10k-labels-idx1-ubyte.gz",
        bytes: 5_148,
        sha256: "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
    },
];

const SHAKESPEARE_FILES: [KnownFile; 1] = [KnownFile {
    name: "input.txt",
    bytes: 1_115_394,
    sha256: "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
}];

/// The SHA-256 is the one TensorFlow Datasets pins for this URL
/// (`tensorflow_datasets/url_checksums/cifar10.txt`); the authors publish only an MD5.
const CIFAR10_FILES: [KnownFile; 1] = [KnownFile {
    name: "cifar-10-binary.tar.gz",
    bytes: 170_052_171,
    sha256: "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
}];

/// Every data set camel knows, in the order `camel data list` shows them.
pub const KNOWN_SETS: [KnownSet; 4] = [
    KnownSet {
        name: "mnist",
        about: "handwritten digits, 60,000 + 10,000 28×28 images (IDX, gzip)",
        committed: true,
        urls: &[
            "https://yann.lecun.com/exdb/mnist/",
            "https://ossci-datasets.s3.amazonaws.com/mnist/",
            "https://storage.googleapis.com/cvdf-datasets/mnist/",
        ],
        files: &MNIST_FILES,
        note: "",
        unpacks_to: "",
    },
    KnownSet {
        name: "fashion-mnist",
        about: "clothing images, 10 classes, 60,000 + 10,000 28×28 (IDX, gzip)",
        committed: false,
        urls: &[
            "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
            "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
        ],
        files: &FASHION_FILES,
        note: "",
        unpacks_to: "",
    },
    KnownSet {
        name: "cifar-10",
        about: "60,000 32×32 colour images, 10 classes (binary version, one tar.gz)",
        committed: false,
        urls: &["https://www.cs.toronto.edu/~kriz/"],
        files: &CIFAR10_FILES,
        note: "",
        unpacks_to: "cifar-10-batches-bin",
    },
    KnownSet {
        name: "tinyshakespeare",
        about: "1,115,394 characters of Shakespeare (ASCII text)",
        committed: true,
        urls: &["https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/"],
        files: &SHAKESPEARE_FILES,
        note: "",
        unpacks_to: "",
    },
];

/// The known set called `name`, or an error listing the names there are.
pub fn known_set(name: &str) -> Result<&'static KnownSet, FetchError> {
    KNOWN_SETS
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| FetchError::Unknown {
            name: name.to_string(),
            known: KNOWN_SETS.iter().map(|s| s.name).collect(),
        })
}

/// Errors of fetching or verifying data. Each names the set, URL or file involved.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No set of that name.
    #[error("unknown data set {name:?}; known: {}", .known.join(", "))]
    Unknown {
        /// Name asked for.
        name: String,
        /// Names there are.
        known: Vec<&'static str>,
    },
    /// The set cannot be fetched by camel.
    #[error("{name}: {note}")]
    NotFetchable {
        /// Set name.
        name: String,
        /// Why not, and what to do.
        note: String,
    },
    /// Every URL failed; one line per URL.
    #[error("{}: could not download from any URL:\n  {}", .path.display(), .tries.join("\n  "))]
    AllFailed {
        /// Destination file.
        path: PathBuf,
        /// `URL: reason` per attempt.
        tries: Vec<String>,
    },
    /// An archive is corrupt, truncated or holds an entry camel refuses to write.
    #[error("{}: cannot unpack: {detail}", .path.display())]
    Archive {
        /// The archive.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// A local file could not be read or written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// File involved.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
}

/// SHA-256 of a file on disk, lowercase hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The state of one file on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileStatus {
    /// Present with the expected SHA-256.
    Ok,
    /// Absent.
    Missing,
    /// Present with another SHA-256 (given).
    Mismatch(String),
}

/// Checks `path` against `sha256`.
pub fn verify_file(path: &Path, sha256: &str) -> Result<FileStatus, FetchError> {
    match sha256_file(path) {
        Ok(h) if h == sha256 => Ok(FileStatus::Ok),
        Ok(h) => Ok(FileStatus::Mismatch(h)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileStatus::Missing),
        Err(source) => Err(FetchError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// What [`fetch_file`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fetched {
    /// The file was already there with the right checksum.
    AlreadyPresent,
    /// Downloaded from this URL.
    Downloaded(String),
}

/// Downloads `file` into `dest_dir`, trying `base + file.name` for each base URL in turn.
/// `progress(done, total)` is called as bytes arrive. The file appears under its name only
/// once its size and SHA-256 match; a failed attempt leaves nothing behind.
pub fn fetch_file(
    bases: &[String],
    file: &KnownFile,
    dest_dir: &Path,
    mut progress: impl FnMut(u64, Option<u64>),
) -> Result<Fetched, FetchError> {
    let dest = dest_dir.join(file.name);
    if verify_file(&dest, file.sha256)? == FileStatus::Ok {
        return Ok(Fetched::AlreadyPresent);
    }
    std::fs::create_dir_all(dest_dir).map_err(|source| FetchError::Io {
        path: dest_dir.to_path_buf(),
        source,
    })?;
    let agent = ureq::AgentBuilder::new()
        .timeout_connect(std::time::Duration::from_secs(20))
        .timeout_read(std::time::Duration::from_secs(60))
        .build();
    let tmp = dest_dir.join(format!(".{}.part-{}", file.name, std::process::id()));
    let mut tries = Vec::new();
    for base in bases {
        let url = format!("{base}{}", file.name);
        let outcome = download(&agent, &url, &tmp, file, &mut progress);
        match outcome {
            Ok(()) => {
                std::fs::rename(&tmp, &dest).map_err(|source| {
                    let _ = std::fs::remove_file(&tmp);
                    FetchError::Io {
                        path: dest.clone(),
                        source,
                    }
                })?;
                return Ok(Fetched::Downloaded(url));
            }
            Err(why) => {
                let _ = std::fs::remove_file(&tmp);
                tries.push(format!("{url}: {why}"));
            }
        }
    }
    Err(FetchError::AllFailed { path: dest, tries })
}

/// One attempt: stream `url` into `tmp`, hashing as it goes; `Err` says why it failed.
fn download(
    agent: &ureq::Agent,
    url: &str,
    tmp: &Path,
    file: &KnownFile,
    progress: &mut impl FnMut(u64, Option<u64>),
) -> Result<(), String> {
    let resp = agent.get(url).call().map_err(|e| match e {
        ureq::Error::Status(code, r) => format!("HTTP {code} {}", r.status_text()),
        ureq::Error::Transport(t) => t.to_string(),
    })?;
    let total = resp
        .header("Content-Length")
        .and_then(|v| v.parse::<u64>().ok());
    let mut reader = resp.into_reader();
    let mut out = std::fs::File::create(tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut done = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => return Err(format!("connection failed after {done} bytes: {e}")),
        };
        h.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        done += n as u64;
        progress(done, total.or(Some(file.bytes)));
    }
    out.sync_all()
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    if let Some(t) = total {
        if done != t {
            return Err(format!("cut short: {done} of {t} bytes"));
        }
    }
    if done != file.bytes {
        return Err(format!("wrong size: {done} bytes, expected {}", file.bytes));
    }
    let got = hex(&h.finalize());
    if got != file.sha256 {
        return Err(format!(
            "SHA-256 mismatch: got {got}, expected {}",
            file.sha256
        ));
    }
    Ok(())
}

/// Unpacks the gzip-compressed tar `archive` into `dest_dir` and returns the top-level paths it
/// wrote. Everything is written into a temporary folder beside them first and renamed into place
/// only once the whole archive has been read, so a corrupt or truncated archive leaves nothing
/// behind. Only plain files and folders with relative paths inside the archive are accepted;
/// absolute paths, `..` components and links are refused.
pub fn unpack_tar_gz(archive: &Path, dest_dir: &Path) -> Result<Vec<PathBuf>, FetchError> {
    let tmp = dest_dir.join(format!(".unpack-{}", std::process::id()));
    let bad = |detail: String| FetchError::Archive {
        path: archive.to_path_buf(),
        detail,
    };
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| FetchError::Io { path, source }
    };
    let result = (|| {
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
        }
        std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
        let file = std::fs::File::open(archive).map_err(io(archive))?;
        let gz = flate2::read::GzDecoder::new(std::io::BufReader::new(file));
        let mut tar = tar::Archive::new(gz);
        let entries = tar.entries().map_err(|e| bad(e.to_string()))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| bad(e.to_string()))?;
            let name = entry.path().map_err(|e| bad(e.to_string()))?.into_owned();
            let plain = name.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            });
            if !plain {
                return Err(bad(format!("entry {name:?} leaves the folder")));
            }
            let kind = entry.header().entry_type();
            if !(kind.is_file() || kind.is_dir()) {
                return Err(bad(format!(
                    "entry {name:?} is a {kind:?}, not a file or folder"
                )));
            }
            let inside = entry
                .unpack_in(&tmp)
                .map_err(|e| bad(format!("entry {name:?}: {e}")))?;
            if !inside {
                return Err(bad(format!("entry {name:?} leaves the folder")));
            }
        }
        let mut written = Vec::new();
        for item in std::fs::read_dir(&tmp).map_err(io(&tmp))? {
            let item = item.map_err(io(&tmp))?;
            let dest = dest_dir.join(item.file_name());
            if dest.is_dir() {
                std::fs::remove_dir_all(&dest).map_err(io(&dest))?;
            } else if dest.exists() {
                std::fs::remove_file(&dest).map_err(io(&dest))?;
            }
            std::fs::rename(item.path(), &dest).map_err(io(&dest))?;
            written.push(dest);
        }
        written.sort();
        Ok(written)
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("camel-unpack-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A tar.gz holding `entries` (raw names, so a test can write names a builder refuses).
    fn archive(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut b = tar::Builder::new(gz);
        for (name, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn unpacks_files_into_place() {
        let d = temp_dir("ok");
        let a = d.join("set.tar.gz");
        std::fs::write(
            &a,
            archive(&[("batches/a.bin", b"abc"), ("batches/b.bin", b"de")]),
        )
        .unwrap();
        let got = unpack_tar_gz(&a, &d).unwrap();
        assert_eq!(got, vec![d.join("batches")]);
        assert_eq!(std::fs::read(d.join("batches/a.bin")).unwrap(), b"abc");
        assert_eq!(std::fs::read(d.join("batches/b.bin")).unwrap(), b"de");
        // unpacking again replaces the folder
        std::fs::write(d.join("batches/stale.bin"), b"x").unwrap();
        unpack_tar_gz(&a, &d).unwrap();
        assert!(!d.join("batches/stale.bin").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn truncated_or_escaping_archives_leave_nothing() {
        let d = temp_dir("bad");
        let full = archive(&[("batches/a.bin", &[7u8; 5000])]);
        let a = d.join("cut.tar.gz");
        std::fs::File::create(&a)
            .unwrap()
            .write_all(&full[..full.len() / 2])
            .unwrap();
        let e = unpack_tar_gz(&a, &d).unwrap_err().to_string();
        assert!(
            e.contains("cut.tar.gz") && e.contains("cannot unpack"),
            "{e}"
        );
        let evil = d.join("evil.tar.gz");
        std::fs::write(&evil, archive(&[("../escaped.bin", b"x")])).unwrap();
        let e = unpack_tar_gz(&evil, &d).unwrap_err().to_string();
        assert!(e.contains("leaves the folder"), "{e}");
        assert!(!d.join("../escaped.bin").exists());
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        let mut left = left;
        left.sort();
        assert_eq!(
            left,
            ["cut.tar.gz", "evil.tar.gz"],
            "nothing but the archives remains"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
