package bearer

import "syscall"

func statID(st *syscall.Stat_t) fileID {
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtimespec, ctime: st.Ctimespec}
}
