//! The child side of a sandboxed run: namespaces, a minimal read-only root,
//! an init of its own, an unprivileged identity, rlimits and a seccomp
//! filter, set up between `fork` and `exec`.
//!
//! Everything the child needs is prepared by the parent as a [`JailPlan`]
//! (C strings, pre-formatted id maps, the filter program, open descriptors);
//! [`JailPlan::enter`] then only issues system calls, so it is
//! async-signal-safe and may run in `CommandExt::pre_exec` of a
//! multi-threaded program.
//!
//! The sequence (isolated modes) follows what bubblewrap and nsjail do:
//! 1. `setsid` (own session and process group) and joining the run's cgroups.
//! 2. `unshare` mount, network, IPC, UTS and PID namespaces (plus a user
//!    namespace when not root). The network namespace has only a down
//!    loopback device: every connection fails.
//! 3. The new root ([`crate::jail_fs`]): a small tmpfs with the interpreter's
//!    and the system's folders bound read-only (recursively), a generated
//!    minimal `/etc`, the work folder as a size- and inode-limited tmpfs at
//!    `/sandbox`, the same for `/tmp` and `/dev/shm`, a few device nodes;
//!    `pivot_root` into it.
//! 4. Two forks. The first child is pid 1 of the new PID namespace: it waits
//!    for the solution and exits with it, and the kernel then kills every
//!    process left in the namespace (a `setsid` daemon included). The
//!    process that `Command` started waits for it and mirrors the solution's
//!    exit status, so the caller sees the solution's code or signal.
//! 5. The solution (second child): root mode drops to the run's own uid/gid;
//!    `PR_SET_PDEATHSIG`, `PR_SET_NO_NEW_PRIVS`, rlimits, every inherited
//!    descriptor above 2 marked close-on-exec, and the seccomp filter of
//!    [`crate::seccomp`]. Then `exec`.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::ptr;

/// One filesystem action inside the new root, in order.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    /// `mkdir` (mode 0755) of a folder of the new root.
    Mkdir(CString),
    /// `symlink(target, link)`.
    Symlink { target: CString, link: CString },
    /// Recursive bind mount of a host folder or file; read-only (and
    /// `nodev`) unless `writable` (device nodes).
    Bind {
        src: CString,
        dst: CString,
        is_file: bool,
        writable: bool,
    },
    /// A tmpfs with mount options `opts` (e.g. `size=64m,nr_inodes=4096,mode=1777`).
    Tmpfs { dst: CString, opts: CString },
    /// A new file with these contents (the generated `/etc` files).
    WriteFile { path: CString, contents: Vec<u8> },
}

/// How the child is isolated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JailMode {
    /// Started as root: namespaces without a user namespace, then `setuid`.
    Root { uid: u32, gid: u32 },
    /// A user namespace in which the caller's uid/gid appear as `uid`/`gid`.
    UserNamespace { uid: u32, gid: u32 },
    /// No namespaces available: setsid, rlimits and the filter only.
    Bare,
}

/// The work folder of an isolated run: a tmpfs filled with the job's files,
/// whose open descriptor is sent back to the parent to read the outputs.
#[derive(Debug, Clone)]
pub(crate) struct WorkPlan {
    /// Where the tmpfs goes (host view, under `new_root`).
    pub dst: CString,
    /// Its mount options (size, nr_inodes, mode, owner).
    pub opts: CString,
    /// Staged host file → file in the tmpfs.
    pub inputs: Vec<(CString, CString)>,
    /// Owner of the copied files (root mode).
    pub owner: Option<(u32, u32)>,
    /// The private `/tmp` and `/dev/shm` (host view, already mounted when
    /// the work folder is made), sent back with it so that the parent can
    /// tell whether the run filled them.
    pub scratch: Vec<CString>,
    /// The child's end of the socket pair the folders are sent through.
    pub socket: RawFd,
}

/// Everything the child needs, prepared before `fork`.
#[derive(Clone)]
pub(crate) struct JailPlan {
    pub mode: JailMode,
    /// Host folder (empty) on which the new root's tmpfs is mounted.
    pub new_root: CString,
    /// Mount options of the root tmpfs.
    pub root_opts: CString,
    /// Steps relative to the host's view (paths already prefixed with `new_root`).
    pub steps: Vec<Step>,
    /// The work folder (isolated modes).
    pub work: Option<WorkPlan>,
    /// Folder to `chdir` into after `pivot_root` (e.g. `/sandbox`), or on the host in bare mode.
    pub workdir: CString,
    /// `"{inside} {outside} 1\n"` of uid and gid for the user-namespace mode.
    pub uid_map: CString,
    pub gid_map: CString,
    pub rlimits: Vec<(libc::__rlimit_resource_t, u64, u64)>,
    /// `cgroup.procs` of the run's cgroups, opened for writing by the parent.
    pub cgroup_procs: Vec<RawFd>,
    /// The seccomp program.
    pub seccomp: Vec<libc::sock_filter>,
}

pub(crate) fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Writes all of `data` to `fd` (one `write`; the data are a few bytes).
pub(crate) unsafe fn write_all(fd: RawFd, data: &[u8]) -> io::Result<()> {
    // SAFETY: the buffer outlives the call.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    if n != data.len() as isize {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes all of `data` to `path` (for `/proc/self/*_map`), without allocating.
unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: valid NUL-terminated path; the buffer outlives the call.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let res = write_all(fd, data);
        libc::close(fd);
        res
    }
}

/// Closes the descriptors `first..=last`.
unsafe fn close_range(first: u32, last: u32) {
    // SAFETY: closing descriptors of this (forked, single-threaded) process.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, last, 0u32) != 0 {
            for fd in first..=last.min(65_535) {
                libc::close(fd as RawFd);
            }
        }
    }
}

/// Closes every descriptor above 2 except `keep` (itself above 2).
unsafe fn close_all_but(keep: RawFd) {
    // SAFETY: see `close_range`.
    unsafe {
        let keep = keep as u32;
        if keep > 3 {
            close_range(3, keep - 1);
        }
        close_range(keep + 1, u32::MAX);
    }
}

/// Marks every descriptor above 2 close-on-exec.
unsafe fn cloexec_all() {
    // SAFETY: plain descriptor flag changes.
    unsafe {
        if libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) != 0
        {
            for fd in 3..65_536 {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
}

/// Names the new UTS namespace `sandbox` (the host's name stays outside).
unsafe fn set_hostname() -> io::Result<()> {
    const NAME: &[u8] = b"sandbox";
    // SAFETY: a valid buffer of the given length.
    check(unsafe { libc::sethostname(NAME.as_ptr().cast(), NAME.len()) })
}

/// Ends this process the way `status` (a `waitpid` status) says.
unsafe fn mirror(status: libc::c_int) -> ! {
    // SAFETY: signal set-up and exit of this process only.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

/// `waitpid` that retries on `EINTR`.
unsafe fn wait_for(pid: libc::pid_t, status: &mut libc::c_int) -> libc::pid_t {
    loop {
        // SAFETY: `status` is a valid out-pointer.
        let w = unsafe { libc::waitpid(pid, status, 0) };
        if w >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return w;
        }
    }
}

impl JailPlan {
    /// Sets the calling (forked) process up and returns in the process that
    /// is to exec the solution (see the module docs for the two forks).
    ///
    /// # Safety
    /// Only between `fork` and `exec` (it changes the process's namespaces,
    /// root and identity). Performs no allocation.
    pub(crate) unsafe fn enter(&self) -> io::Result<()> {
        // SAFETY: plain system calls on prepared, NUL-terminated strings.
        unsafe {
            check(libc::setsid())?;
            libc::umask(0o022);
            for &fd in &self.cgroup_procs {
                write_all(fd, b"0")?;
            }
            check(libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ))?;
            let namespaces = libc::CLONE_NEWNS
                | libc::CLONE_NEWNET
                | libc::CLONE_NEWIPC
                | libc::CLONE_NEWUTS
                | libc::CLONE_NEWPID;
            match self.mode {
                JailMode::Bare => check(libc::chdir(self.workdir.as_ptr()))?,
                JailMode::Root { .. } => {
                    check(libc::unshare(namespaces))?;
                    set_hostname()?;
                    self.build_root()?;
                    self.split_off_init()?;
                }
                JailMode::UserNamespace { .. } => {
                    check(libc::unshare(libc::CLONE_NEWUSER | namespaces))?;
                    write_file(c"/proc/self/setgroups", b"deny")?;
                    write_file(c"/proc/self/uid_map", self.uid_map.as_bytes())?;
                    write_file(c"/proc/self/gid_map", self.gid_map.as_bytes())?;
                    set_hostname()?;
                    self.build_root()?;
                    self.split_off_init()?;
                }
            }
            if let JailMode::Root { uid, gid } = self.mode {
                check(libc::setgroups(0, ptr::null()))?;
                check(libc::setresgid(gid, gid, gid))?;
                check(libc::setresuid(uid, uid, uid))?;
            }
            // After the identity change, which clears the parent-death signal.
            check(libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ))?;
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
            crate::limits::apply(&self.rlimits)?;
            cloexec_all();
            crate::seccomp::install(&self.seccomp)
        }
    }

    /// Step 4 of the module docs: returns only in the solution's process.
    unsafe fn split_off_init(&self) -> io::Result<()> {
        // SAFETY: fork and wait in a single-threaded (forked) process.
        unsafe {
            // Again: a new user namespace may have cleared it.
            check(libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ))?;
            let mut fds = [0; 2];
            check(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC))?;
            let (status_rd, status_wr) = (fds[0], fds[1]);
            let init = libc::fork();
            if init < 0 {
                return Err(io::Error::last_os_error());
            }
            if init > 0 {
                // The process `Command` started: waits and mirrors. Closing every
                // other descriptor (among them the standard library's exec-error
                // pipe) lets `spawn` return as soon as the solution has exec'd.
                close_all_but(status_rd);
                let mut solution_status: libc::c_int = 0;
                let n = loop {
                    let n = libc::read(
                        status_rd,
                        (&mut solution_status as *mut libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>(),
                    );
                    if n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                        break n;
                    }
                };
                let mut init_status = 0;
                wait_for(init, &mut init_status);
                mirror(if n == std::mem::size_of::<libc::c_int>() as isize {
                    solution_status
                } else {
                    init_status
                });
            }
            // pid 1 of the new PID namespace.
            libc::close(status_rd);
            check(libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ))?;
            let solution = libc::fork();
            if solution < 0 {
                return Err(io::Error::last_os_error());
            }
            if solution > 0 {
                close_all_but(status_wr);
                let mut status = 0;
                loop {
                    let w = wait_for(-1, &mut status);
                    if w == solution {
                        let _ = write_all(
                            status_wr,
                            std::slice::from_raw_parts(
                                (&status as *const libc::c_int).cast(),
                                std::mem::size_of::<libc::c_int>(),
                            ),
                        );
                        // Exiting kills everything left in the namespace.
                        libc::_exit(0);
                    }
                    if w < 0 {
                        libc::_exit(255);
                    }
                }
            }
            libc::close(status_wr);
            Ok(())
        }
    }
}
