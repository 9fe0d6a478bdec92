//! The jail's filesystem, built by the child in its own mount namespace:
//! the root tmpfs and its [`Step`]s, recursive read-only binds, the work
//! folder's tmpfs filled with the job's files (its descriptor, and those of
//! the private `/tmp` and `/dev/shm`, sent back to the parent), and the
//! `pivot_root` into it. Async-signal-safe, like
//! [`crate::jail`].

use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;
use std::ptr;

use crate::jail::{JailPlan, Step, WorkPlan, check, write_all};

const SLASH: &CStr = c"/";
const DOT: &CStr = c".";
const TMPFS: &CStr = c"tmpfs";

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// Mount flags of the filesystem holding `path` that a remount must keep
/// (the kernel refuses to drop them inside a user namespace).
unsafe fn locked_flags(path: &CStr) -> libc::c_ulong {
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

/// Bind-mounts `src` (with its submounts) at `dst` and makes the whole tree
/// read-only and `nodev` unless `writable`, `nosuid` always.
unsafe fn bind(src: &CStr, dst: &CStr, is_file: bool, writable: bool) -> io::Result<()> {
    // SAFETY: plain system calls on valid strings and structs.
    unsafe {
        if is_file {
            let fd = libc::open(
                dst.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
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
        let mut set = MOUNT_ATTR_NOSUID;
        if !writable {
            set |= MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV;
        }
        let attr = MountAttr {
            attr_set: set,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        let ret = libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            dst.as_ptr(),
            (libc::AT_RECURSIVE | libc::AT_SYMLINK_NOFOLLOW) as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        );
        if ret == 0 {
            return Ok(());
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
            return Err(io::Error::last_os_error());
        }
        // Kernels before mount_setattr: the top mount only.
        let mut flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_NOSUID | locked_flags(dst);
        if !writable {
            flags |= libc::MS_RDONLY | libc::MS_NODEV;
        }
        check(libc::mount(
            ptr::null(),
            dst.as_ptr(),
            ptr::null(),
            flags,
            ptr::null(),
        ))
    }
}

/// Creates `path` with `contents`, refusing to follow or reuse anything there.
unsafe fn create_file(path: &CStr, contents: &[u8]) -> io::Result<()> {
    // SAFETY: plain system calls on a valid path and buffer.
    unsafe {
        let fd = libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o644,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let res = if contents.is_empty() {
            Ok(())
        } else {
            write_all(fd, contents)
        };
        libc::close(fd);
        res
    }
}

/// Copies `src` to a new file `dst` (owned by `owner`) through a stack buffer.
unsafe fn copy_in(src: &CStr, dst: &CStr, owner: Option<(u32, u32)>) -> io::Result<()> {
    // SAFETY: plain system calls on valid paths and a stack buffer.
    unsafe {
        let from = libc::open(
            src.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        );
        if from < 0 {
            return Err(io::Error::last_os_error());
        }
        let to = libc::open(
            dst.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o644,
        );
        if to < 0 {
            let err = io::Error::last_os_error();
            libc::close(from);
            return Err(err);
        }
        let mut buf = [0u8; 16 * 1024];
        let mut result = Ok(());
        loop {
            let n = libc::read(from, buf.as_mut_ptr().cast(), buf.len());
            if n == 0 {
                break;
            }
            if n < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                result = Err(io::Error::last_os_error());
                break;
            }
            if let Err(err) = write_all(to, &buf[..n as usize]) {
                result = Err(err);
                break;
            }
        }
        if let (Ok(()), Some((uid, gid))) = (&result, owner)
            && libc::fchown(to, uid, gid) != 0
        {
            result = Err(io::Error::last_os_error());
        }
        libc::close(from);
        libc::close(to);
        result
    }
}

/// Most descriptors sent back from the jail: the work folder, `/tmp`, `/dev/shm`.
pub(crate) const MAX_SENT: usize = 3;

/// Sends the open descriptors `fds` (at most [`MAX_SENT`]) over the unix
/// socket `socket` in one message (`SCM_RIGHTS`).
unsafe fn send_fds(socket: RawFd, fds: &[RawFd]) -> io::Result<()> {
    let n = fds.len().min(MAX_SENT);
    // SAFETY: msghdr and cmsg built on the stack, as cmsg(3) describes; the
    // control buffer (32 bytes) holds the header and three descriptors.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut space = [0u64; 4];
        let bytes = (n * std::mem::size_of::<RawFd>()) as u32;
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(bytes) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(bytes) as _;
        let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
        for (i, &fd) in fds[..n].iter().enumerate() {
            ptr::write_unaligned(data.add(i), fd);
        }
        if libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL) != 1 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Opens the folder `path` (close-on-exec).
unsafe fn open_folder(path: &CStr) -> io::Result<RawFd> {
    // SAFETY: open of a valid, NUL-terminated path.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// The work folder: tmpfs, the job's files, its descriptor to the parent.
unsafe fn make_work(work: &WorkPlan) -> io::Result<()> {
    // SAFETY: see `enter`.
    unsafe {
        check(libc::mount(
            TMPFS.as_ptr(),
            work.dst.as_ptr(),
            TMPFS.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            work.opts.as_ptr().cast(),
        ))?;
        for (src, dst) in &work.inputs {
            copy_in(src, dst, work.owner)?;
        }
        let mut fds = [-1; MAX_SENT];
        let mut n = 0;
        let mut result = Ok(());
        for path in std::iter::once(&work.dst)
            .chain(&work.scratch)
            .take(MAX_SENT)
        {
            match open_folder(path) {
                Ok(fd) => {
                    fds[n] = fd;
                    n += 1;
                }
                Err(err) => {
                    result = Err(err);
                    break;
                }
            }
        }
        if result.is_ok() {
            result = send_fds(work.socket, &fds[..n]);
        }
        for &fd in &fds[..n] {
            libc::close(fd);
        }
        result
    }
}

impl JailPlan {
    /// Step 3 of [`crate::jail`]: the new root and `pivot_root` into it.
    pub(crate) unsafe fn build_root(&self) -> io::Result<()> {
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
                    } => bind(src, dst, *is_file, *writable)?,
                    Step::Tmpfs { dst, opts } => check(libc::mount(
                        TMPFS.as_ptr(),
                        dst.as_ptr(),
                        TMPFS.as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV,
                        opts.as_ptr().cast(),
                    ))?,
                    Step::WriteFile { path, contents } => create_file(path, contents)?,
                }
            }
            if let Some(work) = &self.work {
                make_work(work)?;
            }
            // The root tmpfs itself becomes read-only: the only writable places
            // are /sandbox, /tmp and /dev/shm.
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

/// Receives the descriptors [`make_work`] sent (the work folder first), if
/// they are there.
pub(crate) fn receive_fds(socket: RawFd) -> io::Result<Vec<std::os::fd::OwnedFd>> {
    use std::os::fd::FromRawFd;
    // SAFETY: msghdr and cmsg on the stack; the received descriptors are owned here.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut space = [0u64; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen =
            libc::CMSG_SPACE((MAX_SENT * std::mem::size_of::<RawFd>()) as u32) as _;
        if libc::recvmsg(
            socket,
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        ) < 1
        {
            return Err(io::Error::last_os_error());
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "expected the work folder's descriptor (SCM_RIGHTS) from the jail",
            ));
        }
        let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
        let n = (bytes / std::mem::size_of::<RawFd>()).min(MAX_SENT);
        let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
        let fds: Vec<_> = (0..n)
            .map(|i| std::os::fd::OwnedFd::from_raw_fd(ptr::read_unaligned(data.add(i))))
            .collect();
        if fds.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the jail sent no descriptor",
            ));
        }
        Ok(fds)
    }
}
