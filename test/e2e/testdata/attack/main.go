// Command attack tries one escape or privileged operation from inside a
// sandbox and prints "NAME: ok" when it succeeded or "NAME: ERRNO" when the
// kernel refused it. The end-to-end tests run it in sandboxes; it is a
// static Go binary, so it also proves that Go programs run there.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var attacks = map[string]func(args []string) error{
	"hello": func([]string) error { return nil },
	"ptrace": func([]string) error {
		return unix.PtraceAttach(1)
	},
	"traceme": func([]string) error {
		_, _, e := unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
		return errnoErr(e)
	},
	"mount": func([]string) error {
		return unix.Mount("tmpfs", "/tmp", "tmpfs", 0, "")
	},
	"umount": func([]string) error { return unix.Unmount("/workspace/input", unix.MNT_DETACH) },
	"unshare-user": func([]string) error {
		_, _, e := unix.RawSyscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
		return errnoErr(e)
	},
	"unshare-net": func([]string) error {
		_, _, e := unix.RawSyscall(unix.SYS_UNSHARE, unix.CLONE_NEWNET, 0, 0)
		return errnoErr(e)
	},
	"chroot": func([]string) error { return unix.Chroot("/tmp") },
	"keyctl": func([]string) error {
		_, err := unix.AddKey("user", "mcpbox-attack", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
		return err
	},
	"rawsock": func([]string) error { return sock(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP) },
	"packet":  func([]string) error { return sock(unix.AF_PACKET, unix.SOCK_RAW, 0) },
	"mptcp":   func([]string) error { return sock(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP) },
	"bpf": func([]string) error {
		_, _, e := unix.RawSyscall(unix.SYS_BPF, 0, 0, 0)
		return errnoErr(e)
	},
	"iouring": func([]string) error {
		_, _, e := unix.RawSyscall(unix.SYS_IO_URING_SETUP, 1, 0, 0)
		return errnoErr(e)
	},
	"setuid0": func([]string) error { return unix.Setuid(0) },
	// fake-instance poses as a running gateway (pid 4242) in the state dir
	// args[0], which a hostile config may point into the sandbox's output:
	// its record and an admin socket that answers every request, until
	// its input ends or a minute has passed.
	"fake-instance": func(args []string) error {
		dir := filepath.Join(args[0], "instances")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		ln, err := net.Listen("unix", filepath.Join(dir, "4242.sock"))
		if err != nil {
			return err
		}
		defer ln.Close()
		rec := fmt.Sprintf(`{"pid":4242,"started":%q,"project":"/workspace","state_dir":%q,"transport":"stdio"}`, time.Now().Format(time.RFC3339), args[0])
		if err := os.WriteFile(filepath.Join(dir, "4242.json"), []byte(rec), 0o600); err != nil {
			return err
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("{}\n"))
				c.Close()
			}
		}()
		fmt.Println("fake-instance: listening")
		done := make(chan struct{})
		go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
		}
		return nil
	},
	"connect": func(args []string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", args[0])
		if err == nil {
			c.Close()
		}
		return err
	},
	"dns": func(args []string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := net.DefaultResolver.LookupHost(ctx, args[0])
		return err
	},
	// tgkill tries to crash the sandbox init through any of its threads.
	"tgkill": func([]string) error {
		var last error = unix.ESRCH
		for tid := 1; tid <= 64; tid++ {
			if err := unix.Tgkill(1, tid, unix.SIGILL); err == nil {
				return nil
			} else if err != unix.ESRCH {
				last = err
			}
		}
		return last
	},
	// prlimit-init tries to have the kernel kill the init (RLIMIT_CPU 0).
	"prlimit-init": func([]string) error {
		return unix.Prlimit(1, unix.RLIMIT_CPU, &unix.Rlimit{Cur: 0, Max: 0}, nil)
	},
	// inotify-hog takes every inotify instance the kernel allows this
	// user, reports how many, and holds them until stdin closes: the host
	// must not lose its own budget to it.
	"inotify-hog": func([]string) error {
		n := 0
		for ; n < 4096; n++ {
			if _, err := unix.InotifyInit1(unix.IN_CLOEXEC); err != nil {
				break
			}
		}
		fmt.Printf("inotify-hog: holding %d\n", n)
		_, _ = io.Copy(io.Discard, os.Stdin)
		return nil
	},
	// http fetches a URL with a Go client that takes its proxy from the
	// environment even for loopback targets (net/http's default skips the
	// proxy for those) and prints the body.
	"http": func(args []string) error {
		proxy, err := url.Parse(os.Getenv("HTTP_PROXY"))
		if err != nil {
			return err
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
		resp, err := c.Get(args[0])
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("status %d body %s\n", resp.StatusCode, body)
		return nil
	},
	// tunnel asks the proxy for a CONNECT to HOST:PORT and does a GET
	// through the tunnel, as an HTTPS client would before its handshake.
	"tunnel": func(args []string) error {
		proxy, err := url.Parse(os.Getenv("HTTPS_PROXY"))
		if err != nil {
			return err
		}
		c, err := net.DialTimeout("tcp", proxy.Host, 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", args[0], args[0])
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("CONNECT: %s", resp.Status)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", args[0])
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("status %d body %s\n", resp.StatusCode, body)
		return nil
	},
	// echo dials ADDR, sends a line and prints what comes back.
	"echo": func(args []string) error {
		c, err := net.DialTimeout("tcp", args[0], 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		fmt.Printf("echoed %q\n", line)
		return err
	},
	"kill": func(args []string) error {
		var pid int
		fmt.Sscan(args[0], &pid)
		return unix.Kill(pid, 0)
	},
}

func sock(domain, typ, proto int) error {
	fd, err := unix.Socket(domain, typ, proto)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: attack NAME [ARG]")
		os.Exit(2)
	}
	f, ok := attacks[os.Args[1]]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown attack", os.Args[1])
		os.Exit(2)
	}
	err := f(os.Args[2:])
	var errno syscall.Errno
	switch {
	case err == nil:
		fmt.Printf("%s: ok\n", os.Args[1])
	case errors.As(err, &errno):
		fmt.Printf("%s: %s\n", os.Args[1], unix.ErrnoName(errno))
	default:
		fmt.Printf("%s: error: %v\n", os.Args[1], err)
	}
}
