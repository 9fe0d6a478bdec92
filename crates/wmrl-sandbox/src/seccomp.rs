//! The seccomp filter every solution runs under: a small classic-BPF program,
//! built with `libc` alone, that refuses the system calls an ML script never
//! needs and that are the usual kernel escalation surface.
//!
//! Refused with `EPERM`:
//! - namespaces: `unshare`, `setns`, and `clone` with any `CLONE_NEW*` flag;
//! - mounts: `mount`, `umount2`, `pivot_root`, `chroot`, the new mount API
//!   (`fsopen`, `fsmount`, `move_mount`, `open_tree`, `mount_setattr`, …);
//! - other processes and the kernel: `ptrace`, `process_vm_readv/writev`,
//!   `kcmp`, `keyctl`, `add_key`, `request_key`, `bpf`, `perf_event_open`,
//!   `userfaultfd`, `io_uring_*`, modules, `kexec_*`, `reboot`, `swapon/off`,
//!   `acct`, `quotactl`, `open_by_handle_at`, `syslog`, `iopl`/`ioperm`;
//! - netlink sockets other than `NETLINK_ROUTE` (netfilter, xfrm, audit, …).
//!
//! `clone3` answers `ENOSYS`: its flags live in memory the filter cannot
//! read, and glibc then falls back to `clone`, whose flags it can. Calls of a
//! foreign architecture (x32, or a 32-bit ABI) kill the process.

use libc::{sock_filter, sock_fprog};

/// `AUDIT_ARCH_*` of the architecture this crate is built for.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// Bit x86_64 sets in the number of an x32 system call.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Namespace flags of `clone`/`unshare` (`CLONE_NEWTIME` is not in libc).
const CLONE_NEW_ANY: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u32
    | 0x80;

/// Offsets into `struct seccomp_data`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_ARG0: u32 = 16;
const OFF_ARG2: u32 = 32;

/// System calls refused outright.
fn denied() -> Vec<libc::c_long> {
    let mut calls = vec![
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_mount_setattr,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kcmp,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_reboot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_syslog,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([libc::SYS_iopl, libc::SYS_ioperm]);
    calls
}

const fn stmt(code: u32, k: u32) -> sock_filter {
    sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u32, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

const LOAD: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
const JEQ: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
const JSET: u32 = libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K;
const RET: u32 = libc::BPF_RET | libc::BPF_K;
const ALLOW: sock_filter = stmt(RET, libc::SECCOMP_RET_ALLOW);
const KILL: sock_filter = stmt(RET, libc::SECCOMP_RET_KILL_PROCESS);

fn errno(e: i32) -> sock_filter {
    stmt(
        RET,
        libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA),
    )
}

/// The filter program (see the module docs).
pub(crate) fn program() -> Vec<sock_filter> {
    let mut p = vec![
        stmt(LOAD, OFF_ARCH),
        jump(JEQ, AUDIT_ARCH, 1, 0),
        KILL,
        stmt(LOAD, OFF_NR),
    ];
    #[cfg(target_arch = "x86_64")]
    p.extend([jump(JSET, X32_SYSCALL_BIT, 0, 1), KILL]);
    for nr in denied() {
        p.extend([jump(JEQ, nr as u32, 0, 1), errno(libc::EPERM)]);
    }
    // clone3: ENOSYS, so that the C library falls back to clone.
    p.extend([
        jump(JEQ, libc::SYS_clone3 as u32, 0, 1),
        errno(libc::ENOSYS),
    ]);
    // clone with a namespace flag (flags are the first argument on x86_64 and aarch64).
    p.extend([
        jump(JEQ, libc::SYS_clone as u32, 0, 4),
        stmt(LOAD, OFF_ARG0),
        jump(JSET, CLONE_NEW_ANY, 0, 1),
        errno(libc::EPERM),
        ALLOW,
    ]);
    // socket(AF_NETLINK, _, protocol != NETLINK_ROUTE).
    p.extend([
        jump(JEQ, libc::SYS_socket as u32, 0, 6),
        stmt(LOAD, OFF_ARG0),
        jump(JEQ, libc::AF_NETLINK as u32, 0, 3),
        stmt(LOAD, OFF_ARG2),
        jump(JEQ, libc::NETLINK_ROUTE as u32, 1, 0),
        errno(libc::EPERM),
        ALLOW,
    ]);
    p.push(ALLOW);
    p
}

/// Installs `program` for the calling thread and its future children.
///
/// # Safety
/// Meant for `pre_exec` (no allocation); `PR_SET_NO_NEW_PRIVS` must be set.
pub(crate) unsafe fn install(program: &[sock_filter]) -> std::io::Result<()> {
    let prog = sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at a valid filter that outlives the call.
    let ret = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &prog as *const sock_fprog as libc::c_ulong,
            0,
            0,
        )
    };
    if ret != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_fits_and_ends_in_allow() {
        let p = program();
        assert!(p.len() < 256, "{} instructions", p.len());
        let last = p.last().unwrap();
        assert_eq!((last.code as u32, last.k), (RET, libc::SECCOMP_RET_ALLOW));
    }
}
