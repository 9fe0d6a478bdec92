//! The child side of a sandboxed run: namespaces, a minimal read-only root,
//! an unprivileged identity and rlimits, set up between `fork` and `exec`.
//!
//! Everything the child needs is prepared by the parent as a [`JailPlan`]
//! (C strings, pre-formatted id maps); [`JailPlan::enter`] then only issues
//! system calls, so it is async-signal-safe and may run in
//! `CommandExt::pre_exec` of a multi-threaded program.
//!
//! The sequence (isolated modes) follows what bubblewrap and nsjail do:
//! 1. `setsid`: own session and process group, so the parent can kill the
//!    whole group.
//! 2. `unshare` mount, network, IPC and UTS namespaces (plus a user namespace
//!    when not root). The network namespace has only a down loopback device:
//!    every connection fails.
//! 3. Mount propagation private; a small tmpfs becomes the new root, into which
//!    the interpreter's folders and the system folders are bind-mounted
//!    read-only, the work folder read-write at `/sandbox`, a size-limited tmpfs
//!    at `/tmp` and a few device nodes under `/dev`. Nothing else of the host
//!    exists inside, in particular not the task's hidden answers.
//! 4. `pivot_root` into it and detach the old root.
//! 5. Root mode: drop to the run's own unprivileged uid/gid (so `RLIMIT_NPROC`
//!    is enforced and file permissions apply). `PR_SET_PDEATHSIG` (the child
//!    dies with the parent) and `PR_SET_NO_NEW_PRIVS`.
//! 6. rlimits.

use std::ffi::CString;
use std::io;
use std::ptr;

/// One filesystem action inside the new root, in order.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    /// `mkdir` (mode 0755) of a folder of the new root.
    Mkdir(CString),
    /// `symlink(target, link)`.
    Symlink { target: CString, link: CString },
    /// Recursive bind mount of a host folder or file; read-only unless `writable`.
    Bind {
        src: CString,
        dst: CString,
        is_file: bool,
        writable: bool,
    },
    /// A tmpfs with mount options `opts` (e.g. `size=64m,mode=1777`).
    Tmpfs { dst: CString, opts: CString },
}

/// How the child is isolated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JailMode {
    /// Started as root: namespaces without a user namespace, then `setuid`.
    Root { uid: u32, gid: u32 },
    /// Unprivileged: a user namespace mapping the caller's uid/gid to themselves.
    UserNamespace { uid: u32, gid: u32 },
    /// No namespaces available: setsid and rlimits only.
    Bare,
}

/// Everything the child needs, prepared before `fork`.
#[derive(Debug, Clone)]
pub(crate) struct JailPlan {
    pub mode: JailMode,
    /// Host folder (empty) on which the new root's tmpfs is mounted.
    pub new_root: CString,
    /// Mount options of the root tmpfs.
    pub root_opts: CString,
    /// Steps relative to the host's view (paths already prefixed with `new_root`).
    pub steps: Vec<Step>,
    /// Folder to `chdir` into after `pivot_root` (e.g. `/sandbox`), or on the host in bare mode.
    pub workdir: CString,
    /// `"{uid} {uid} 1\n"` and `"{gid} {gid} 1\n"` for the user-namespace mode.
    pub uid_map: CString,
    pub gid_map: CString,
    pub rlimits: Vec<(libc::__rlimit_resource_t, u64, u64)>,
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

const SLASH: &std::ffi::CStr = c"/";
const DOT: &std::ffi::CStr = c".";
const TMPFS: &std::ffi::CStr = c"tmpfs";

/// Writes all of `data` to `path` (for `/proc/self/*_map`), without allocating.
unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: valid NUL-terminated path; the buffer outlives the call.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n != data.len() as isize {
            Err(err)
        } else {
            Ok(())
        }
    }
}

/// Mount flags of the filesystem holding `path` that a remount must keep
/// (the kernel refuses to drop them inside a user namespace).
unsafe fn locked_flags(path: &std::ffi::CStr) -> libc::c_ulong {
    // SAFETY: statvfs fills a zeroed struct from a valid path.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &mut st) != 0 {
            return 0;
        }
        let f = st.f_flag as libc::c_ulong;
        let mut out = 0;
        for (st_bit, ms_bit) in [
            (libc::ST_NOSUID, libc::MS_NOSUID),
            (libc::ST_NODEV, libc::MS_NODEV),
            (libc::ST_NOEXEC, libc::MS_NOEXEC),
            (libc::ST_NOATIME, libc::MS_NOATIME),
            (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
            (libc::ST_RELATIME, libc::MS_RELATIME),
        ] {
            if f & st_bit != 0 {
                out |= ms_bit;
            }
        }
        out
    }
}

impl JailPlan {
    /// Sets the calling (forked) process up and returns; the caller then execs.
    ///
    /// # Safety
    /// Only between `fork` and `exec` (it changes the process's namespaces,
    /// root and identity). Performs no allocation.
    pub(crate) unsafe fn enter(&self) -> io::Result<()> {
        // SAFETY: plain system calls on prepared, NUL-terminated strings.
        unsafe {
            check(libc::setsid())?;
            libc::umask(0o022);
            match self.mode {
                JailMode::Bare => {
                    check(libc::chdir(self.workdir.as_ptr()))?;
                }
                JailMode::Root { uid, gid } => {
                    check(libc::unshare(
                        libc::CLONE_NEWNS
                            | libc::CLONE_NEWNET
                            | libc::CLONE_NEWIPC
                            | libc::CLONE_NEWUTS,
                    ))?;
                    self.build_root()?;
                    check(libc::setgroups(0, ptr::null()))?;
                    check(libc::setresgid(gid, gid, gid))?;
                    check(libc::setresuid(uid, uid, uid))?;
                }
                JailMode::UserNamespace { .. } => {
                    check(libc::unshare(
                        libc::CLONE_NEWUSER
                            | libc::CLONE_NEWNS
                            | libc::CLONE_NEWNET
                            | libc::CLONE_NEWIPC
                            | libc::CLONE_NEWUTS,
                    ))?;
                    write_file(c"/proc/self/setgroups", b"deny")?;
                    write_file(c"/proc/self/uid_map", self.uid_map.as_bytes())?;
                    write_file(c"/proc/self/gid_map", self.gid_map.as_bytes())?;
                    self.build_root()?;
                }
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
            crate::limits::apply(&self.rlimits)
        }
    }

    /// Steps 3 and 4: the new root and `pivot_root` into it.
    unsafe fn build_root(&self) -> io::Result<()> {
        // SAFETY: see `enter`.
        unsafe {
            check(libc::mount(
                ptr::null(),
                SLASH.as_ptr(),
                ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                ptr::null(),
            ))?;
            check(libc::mount(
                TMPFS.as_ptr(),
                self.new_root.as_ptr(),
                TMPFS.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                self.root_opts.as_ptr().cast(),
            ))?;
            for step in &self.steps {
                match step {
                    Step::Mkdir(path) => {
                        if libc::mkdir(path.as_ptr(), 0o755) != 0 {
                            let err = io::Error::last_os_error();
                            if err.raw_os_error() != Some(libc::EEXIST) {
                                return Err(err);
                            }
                        }
                    }
                    Step::Symlink { target, link } => {
                        check(libc::symlink(target.as_ptr(), link.as_ptr()))?
                    }
                    Step::Bind {
                        src,
                        dst,
                        is_file,
                        writable,
                    } => {
                        if *is_file {
                            let fd = libc::open(
                                dst.as_ptr(),
                                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                                0o644,
                            );
                            if fd < 0 {
                                return Err(io::Error::last_os_error());
                            }
                            libc::close(fd);
                        }
                        check(libc::mount(
                            src.as_ptr(),
                            dst.as_ptr(),
                            ptr::null(),
                            libc::MS_BIND | libc::MS_REC,
                            ptr::null(),
                        ))?;
                        let mut flags =
                            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOSUID | locked_flags(dst);
                        if !*writable {
                            flags |= libc::MS_RDONLY;
                        }
                        check(libc::mount(
                            ptr::null(),
                            dst.as_ptr(),
                            ptr::null(),
                            flags,
                            ptr::null(),
                        ))?;
                    }
                    Step::Tmpfs { dst, opts } => check(libc::mount(
                        TMPFS.as_ptr(),
                        dst.as_ptr(),
                        TMPFS.as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV,
                        opts.as_ptr().cast(),
                    ))?,
                }
            }
            // The root tmpfs itself becomes read-only: the only writable places
            // are /sandbox and /tmp.
            check(libc::mount(
                ptr::null(),
                self.new_root.as_ptr(),
                ptr::null(),
                libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
                self.root_opts.as_ptr().cast(),
            ))?;
            check(libc::chdir(self.new_root.as_ptr()))?;
            check(libc::syscall(libc::SYS_pivot_root, DOT.as_ptr(), DOT.as_ptr()) as libc::c_int)?;
            check(libc::umount2(DOT.as_ptr(), libc::MNT_DETACH))?;
            check(libc::chdir(self.workdir.as_ptr()))?;
        }
        Ok(())
    }
}
