package vaultd_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshgen/meshgen/vaultd/client"
)

// vaultdBin is the real vaultd binary, built once for the tests that run it
// as a child process (kill -9, another uid).
var vaultdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vaultd-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	vaultdBin = filepath.Join(dir, "vaultd")
	if out, err := exec.Command("go", "build", "-o", vaultdBin, "github.com/meshgen/meshgen/cmd/vaultd").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build vaultd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer collects a child's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// daemon is the real vaultd binary running as a child process.
type daemon struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	dir    string
	sock   string
	client *client.Client
}

// startDaemon runs vaultd on dir and a socket in sockDir and waits until it
// answers.
func startDaemon(t *testing.T, dir, sockDir string, out *syncBuffer, args ...string) *daemon {
	t.Helper()
	sock := filepath.Join(sockDir, "vault.sock")
	cmd := exec.Command(vaultdBin, append([]string{"--dir", dir, "--listen", "unix://" + sock}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, out: out, dir: dir, sock: sock, client: client.Dial(sock)}
	t.Cleanup(func() { d.kill() })
	waitReady(t, d)
	return d
}

func waitReady(t *testing.T, d *daemon) {
	t.Helper()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.client.Recipient(ctx)
		cancel()
		if err == nil {
			return
		}
		if d.cmd.ProcessState != nil || i > 500 {
			t.Fatalf("vaultd did not start: %v\n%s", err, d.out.Bytes())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill9 kills the daemon with SIGKILL: no cleanup of any kind runs.
func (d *daemon) kill() {
	if d.cmd.ProcessState != nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	d.cmd.Wait()
	d.client.Close()
}

// stop stops the daemon with SIGTERM and checks it exits cleanly.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("vaultd exit: %v\n%s", err, d.out.Bytes())
	}
	d.client.Close()
}

// shortDir is a directory with a short path, for sockets (108 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "vd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
