//! The files CI reads besides stdout: the `--junit` file of `dpctl plugin
//! check` and `dpctl smoke`, opened before a run, so a bad path is reported
//! before anything runs (the XML itself is rendered by `output::junit`); and
//! GitHub Actions' step summary, appended to after a run.

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

/// The environment variable GitHub Actions names its step summary file in.
pub const STEP_SUMMARY_ENV: &str = "GITHUB_STEP_SUMMARY";

/// Appends the Markdown `render` writes to the file `$GITHUB_STEP_SUMMARY`
/// names (nothing when it is unset or empty), as GitHub expects: each step
/// appends its own. The results are on stdout already, so a file that
/// cannot take it is a warning on `err`, not a failure of the run.
pub fn step_summary(err: &mut dyn Write, render: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    let Some(path) = std::env::var_os(STEP_SUMMARY_ENV).filter(|p| !p.is_empty()).map(PathBuf::from) else {
        return Ok(());
    };
    let mut text = Vec::new();
    render(&mut text).map_err(super::out_err)?;
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .and_then(|mut f| f.write_all(&text).and_then(|()| f.flush()));
    if let Err(e) = appended {
        writeln!(
            err,
            "dpctl: warning: cannot append the step summary to {} (${STEP_SUMMARY_ENV}): {e}",
            path.display()
        )
        .map_err(super::out_err)?;
    }
    Ok(())
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
