package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/meshgen/meshgen/vaultd/client"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestVaultScripts runs testdata/script/vault_*.txtar against the real vaultd
// binary, built here and put on PATH. (TestScripts runs them too, where
// vaultd is not on PATH, and they skip.)
func TestVaultScripts(t *testing.T) {
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/meshgen/meshgen/cmd/vaultd").CombinedOutput(); err != nil {
		t.Fatalf("build vaultd: %v\n%s", err, out)
	}
	files, err := filepath.Glob("testdata/script/vault_*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vault scripts: %v", err)
	}
	// [exec:vaultd] looks in this process's PATH.
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	testscript.Run(t, testscript.Params{
		Files: files,
		Setup: func(env *testscript.Env) error {
			// A unix socket path is limited to 108 bytes: keep it short.
			d, err := os.MkdirTemp("", "vs")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(d) })
			env.Setenv("SOCK", filepath.Join(d, "vault.sock"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitvault": waitVault,
			"seal":      sealCmd,
		},
	})
}

// waitVault SOCKET waits until the vaultd started in the background answers.
func waitVault(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitvault SOCKET")
	}
	c := client.Dial(args[0])
	defer c.Close()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Recipient(ctx)
		cancel()
		if err == nil {
			return
		}
		if i > 500 {
			ts.Fatalf("vaultd does not answer on %s: %v", args[0], err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sealCmd NAME KIND seals NAME as the reconciler would, to a provider node
// (applier) and a consumer node (reader), each with a new age identity.
func sealCmd(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: seal NAME one-party|two-party")
	}
	var rs []string
	for range 2 {
		id, err := age.GenerateX25519Identity()
		ts.Check(err)
		rs = append(rs, id.Recipient().String())
	}
	c := client.Dial(ts.Getenv("MESHGEN_VAULT"))
	defer c.Close()
	_, err := c.Seal(context.Background(), client.SealRequest{Name: args[0], Spec: client.Spec{Rotation: args[1]}, Appliers: rs[:1], Recipients: rs[1:]})
	if neg {
		if err == nil {
			ts.Fatalf("seal %s succeeded", args[0])
		}
		return
	}
	ts.Check(err)
}
