//! The control plane's processes, and the guarantee that none outlives the test binary.
//!
//! Every process is spawned by one long-lived thread, the keeper, with `PR_SET_PDEATHSIG`
//! set to SIGKILL. Linux sends that signal when the *thread* that forked the child ends, which
//! is why a test's own thread (gone when its test returns) must not spawn them: the keeper only
//! ends with the process, however the process ends — normal exit, a panic that aborts, SIGKILL.
//! On a normal exit an `atexit` handler also kills the processes and removes their folder,
//! since libtest never runs the destructors of statics.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

type Task = Box<dyn FnOnce() + Send>;

/// The processes and folders to clean up at exit.
struct Live {
    children: Vec<Child>,
    dirs: Vec<PathBuf>,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    children: Vec::new(),
    dirs: Vec::new(),
});

static KEEPER: OnceLock<Mutex<mpsc::Sender<Task>>> = OnceLock::new();

/// Runs `f` on the keeper thread and returns its result.
pub fn on_keeper<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let sender = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Task>();
        std::thread::Builder::new()
            .name("envtest-keeper".to_owned())
            .spawn(move || {
                while let Ok(task) = rx.recv() {
                    task();
                }
                // The sender lives in a static: recv only fails at process exit.
                loop {
                    std::thread::park();
                }
            })
            .expect("the envtest keeper thread starts");
        // SAFETY: `cleanup` is an `extern "C" fn()` that never unwinds.
        unsafe { libc::atexit(cleanup) };
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::channel();
    let task: Task = Box::new(move || {
        let _ = tx.send(f());
    });
    sender
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send(task)
        .expect("the keeper thread runs");
    rx.recv().expect("the keeper thread answers")
}

/// A folder to remove at exit.
pub fn remove_at_exit(dir: &Path) {
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .dirs
        .push(dir.to_owned());
}

/// Starts `program` with its output appended to `log`; call on the keeper thread.
pub fn spawn(program: &Path, args: &[String], log: &Path) -> Result<u32, String> {
    spawn_with(program, args, &[], log)
}

/// [`spawn`], with `envs` added to the environment it inherits.
pub fn spawn_with(
    program: &Path,
    args: &[String],
    envs: &[(String, String)],
    log: &Path,
) -> Result<u32, String> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let parent = std::process::id();
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt as _;
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let child = command
        .spawn()
        .map_err(|e| format!("starting {}: {e}", program.display()))?;
    let pid = child.id();
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .children
        .push(child);
    Ok(pid)
}

/// Sends SIGKILL to `pid`, one of ours, and reaps it.
pub fn kill(pid: u32) {
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(index) = live.children.iter().position(|c| c.id() == pid) {
        let mut child = live.children.remove(index);
        drop(live);
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Whether the process is still running (false once it has exited).
pub fn running(pid: u32) -> bool {
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    live.children
        .iter_mut()
        .find(|c| c.id() == pid)
        .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
}

/// Kills the processes and removes the folder now (for a control plane that is dropped).
pub fn stop(pids: &[u32], dir: &Path) {
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let (stopping, kept): (Vec<Child>, Vec<Child>) = live
        .children
        .drain(..)
        .partition(|c| pids.contains(&c.id()));
    live.children = kept;
    live.dirs.retain(|d| d != dir);
    drop(live);
    for mut child in stopping {
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = std::fs::remove_dir_all(dir);
}

extern "C" fn cleanup() {
    // A poisoned or held lock at exit: the death signal still ends the processes.
    let Ok(mut live) = LIVE.try_lock() else {
        return;
    };
    for child in &mut live.children {
        let _ = child.kill();
        let _ = child.wait();
    }
    if std::env::var_os("JOBWARDEN_ENVTEST_KEEP").is_none() {
        for dir in &live.dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A loopback port nobody listens on now, and never handed out before in this process: planes
/// started at once each pick theirs between the kernel freeing a port and a component binding
/// it, and a stopped kube-apiserver's port stays its own for its restart.
pub fn free_port() -> Result<u16, String> {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    // Hold the listeners of ports already handed out until a new one comes up, so the kernel
    // cannot offer them again meanwhile.
    let mut held = Vec::new();
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("finding a free port: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("finding a free port: {e}"))?
            .port();
        if HANDED_OUT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(port)
        {
            return Ok(port);
        }
        if held.len() > 1000 {
            return Err("finding a free port: the kernel keeps offering used ones".to_owned());
        }
        held.push(listener);
    }
}

/// Sends SIGTERM to `pid`, one of ours, and waits until it has exited or `finished` says its
/// shutdown has done all that matters, whereupon what is left of it is killed; SIGKILL, and an
/// error, after `grace`. Either way it is then no longer ours to clean up.
pub fn terminate(pid: u32, grace: Duration, finished: impl Fn() -> bool) -> Result<(), String> {
    {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        let child = live
            .children
            .iter_mut()
            .find(|c| c.id() == pid)
            .ok_or_else(|| format!("process {pid} is not one this test binary started"))?;
        // SAFETY: kill(2) on a child of ours that has not been reaped (the lock is held), so
        // the pid is still its own.
        if matches!(child.try_wait(), Ok(None))
            && unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) } != 0
        {
            return Err(format!(
                "SIGTERM to {pid}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    let started = Instant::now();
    loop {
        let done = finished();
        // The lock is released between looks: other threads ask whether their processes run.
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        let Some(index) = live.children.iter().position(|c| c.id() == pid) else {
            return Ok(());
        };
        let mut child = live.children.remove(index);
        if !matches!(child.try_wait(), Ok(None)) {
            return Ok(());
        }
        let late = started.elapsed() > grace;
        if done || late {
            let _ = child.kill();
            let _ = child.wait();
            return if late {
                Err(format!(
                    "process {pid} did not finish within {grace:?} of SIGTERM, and was killed"
                ))
            } else {
                Ok(())
            };
        }
        live.children.push(child);
        drop(live);
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The last lines of a log, for an error message.
pub fn tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Folders left by test binaries that were killed before their exit handler ran.
pub fn remove_stale_folders() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| n.strip_prefix("jobwarden-envtest-"))
        else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
