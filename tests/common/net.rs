//! Loopback sockets for tests of what a client does when a server is not there.

/// A TCP socket bound to a free loopback port, never put in the listening
/// state, so that a connection to the port is refused; the port stays ours
/// until the descriptor is dropped.
pub fn bound_not_listening() -> (std::os::fd::OwnedFd, u16) {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: plain socket calls on a descriptor we own; the address
    // structures are zeroed and sized as the calls require.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let fd = OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let rc = libc::bind(fd.as_raw_fd(), (&raw const addr).cast(), len);
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        let mut bound: libc::sockaddr_in = std::mem::zeroed();
        let mut len = len;
        let rc = libc::getsockname(fd.as_raw_fd(), (&raw mut bound).cast(), &mut len);
        assert_eq!(rc, 0, "getsockname: {}", std::io::Error::last_os_error());
        (fd, u16::from_be(bound.sin_port))
    }
}
