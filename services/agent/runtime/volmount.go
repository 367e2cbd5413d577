package runtime

import (
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/core/mount"
)

// MountLocalVolume mounts device, of filesystem type typ with the comma-separated mount
// options o, at dir, as Docker's local volume driver does with driverOpts type, device
// and o (e.g. type tmpfs, device tmpfs, o size=64m; or type none, device /path, o bind).
// Flags in o (ro, nodev, bind, …) become mount flags and the rest filesystem data, as
// mount(8) does (containerd's mount package). It does nothing when dir already is a
// mount point (an earlier container of the task or a restarted agent mounted it).
func MountLocalVolume(dir, typ, device, o string) error {
	canon, err := mount.CanonicalizePath(dir)
	if err != nil {
		return err
	}
	if info, err := mount.Lookup(canon); err == nil && info.Mountpoint == canon {
		return nil
	}
	var opts []string
	if o != "" {
		opts = strings.Split(o, ",")
	}
	m := mount.Mount{Type: typ, Source: device, Options: opts}
	if err := m.Mount(canon); err != nil {
		return fmt.Errorf("mount %s (type %s, o %q) at %s: %w", device, typ, o, canon, err)
	}
	return nil
}

// UnmountUnder detaches every mount at or under dir (deepest first), so a directory of
// volumes mounted by MountLocalVolume can be removed. A dir that does not exist is no
// error.
func UnmountUnder(dir string) error {
	return mount.UnmountRecursive(dir, syscall.MNT_DETACH)
}

// nfsOptions are the mount options efs-utils mounts EFS with (Amazon EFS User Guide,
// "Mounting EFS file systems"): NFSv4.1, 1 MiB transfers, hard mounts, 60 s timeouts.
const nfsOptions = "vers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport"

// MountNFS mounts the NFS export source ("host:/path") at dir with nfsOptions, by the
// mount(2) system call (no mount.nfs helper): the host is resolved here and passed as
// addr=, as mount.nfs does. It does nothing when dir already is a mount point (a
// restarted agent's task). The kernel needs its NFS client (nfs4 in /proc/filesystems).
func MountNFS(dir, source string) error {
	host, _, ok := strings.Cut(source, ":")
	if !ok || host == "" {
		return fmt.Errorf("mount.nfs4: %s: not HOST:/PATH", source)
	}
	addrs, err := net.LookupHost(strings.Trim(host, "[]"))
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("mount.nfs4: Failed to resolve server %s: %v", host, err)
	}
	if err := MountLocalVolume(dir, "nfs4", source, nfsOptions+",addr="+addrs[0]); err != nil {
		return fmt.Errorf("mount.nfs4: mounting %s failed: %w", source, err)
	}
	return nil
}
