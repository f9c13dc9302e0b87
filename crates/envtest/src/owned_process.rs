//! A process of a test's own beside the control planes (`jobwarden serve`, say), held as they
//! are: spawned by the keeper thread with a death signal, so it never outlives the test binary,
//! however that ends; killed when dropped.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::process;

pub struct OwnedProcess {
    pid: u32,
    log: PathBuf,
}

impl OwnedProcess {
    /// Starts `program` with `args`, `envs` added to the test's environment, its output
    /// appended to `log`.
    pub fn start(
        program: &Path,
        args: &[String],
        envs: &[(String, String)],
        log: &Path,
    ) -> Result<OwnedProcess, String> {
        let (program, args, envs, log) = (
            program.to_owned(),
            args.to_vec(),
            envs.to_vec(),
            log.to_owned(),
        );
        let pid = {
            let log = log.clone();
            process::on_keeper(move || process::spawn_with(&program, &args, &envs, &log))?
        };
        Ok(OwnedProcess { pid, log })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The end of its log, for a failure's message.
    pub fn tail(&self, lines: usize) -> String {
        process::tail(&self.log, lines)
    }

    pub fn running(&self) -> bool {
        process::running(self.pid)
    }

    /// SIGKILL, now.
    pub fn kill(&self) {
        process::kill(self.pid);
    }

    /// SIGTERM, then SIGKILL (and an error) if it has not exited within `grace`.
    pub fn terminate(&self, grace: Duration) -> Result<(), String> {
        process::terminate(self.pid, grace, || false)
    }
}

impl Drop for OwnedProcess {
    fn drop(&mut self) {
        process::kill(self.pid);
    }
}
