//! The `--junit` file of `dpctl plugin check` and `dpctl smoke`: opened
//! before a run, so a bad path is reported before anything runs; the XML
//! itself is rendered by `output::junit`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A `--junit` file, created before the run.
#[derive(Debug)]
pub struct JunitFile {
    path: PathBuf,
    file: File,
}

impl JunitFile {
    /// Creates the file `--junit` names (none without the flag). A path that
    /// cannot be created is bad input (exit 2), reported before anything runs.
    pub fn create(path: Option<&Path>) -> Result<Option<JunitFile>> {
        path.map(|p| {
            File::create(p).map(|file| JunitFile { path: p.to_path_buf(), file }).map_err(|e| cannot_write(p, &e))
        })
        .transpose()
    }

    /// Writes the report with `render` and flushes. A file that cannot take it
    /// (a full disk, /dev/full) is bad input too (exit 2): the results are on
    /// stdout already.
    pub fn write(self, render: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
        let mut w = BufWriter::new(self.file);
        render(&mut w).and_then(|()| w.flush()).map_err(|e| cannot_write(&self.path, &e))
    }
}

fn cannot_write(path: &Path, e: &io::Error) -> Error {
    Error::invalid("--junit", format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_junit_file_that_cannot_be_created_or_written_names_the_flag() {
        let e = JunitFile::create(Some(Path::new("/nonexistent-dir/r.xml"))).unwrap_err();
        assert!(e.to_string().contains("--junit: cannot write /nonexistent-dir/r.xml"), "{e}");
        assert_eq!(e.exit_code(), crate::error::exit::USAGE);
        assert!(JunitFile::create(None).unwrap().is_none());
        if Path::new("/dev/full").exists() {
            let f = JunitFile::create(Some(Path::new("/dev/full"))).unwrap().unwrap();
            let e = f.write(|w| writeln!(w, "<testsuites/>")).unwrap_err();
            assert!(e.to_string().contains("--junit: cannot write /dev/full"), "{e}");
        }
    }
}
