package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/meshgen/meshgen/reconciler/sign"
)

// TestVaultdScripts runs testdata/vaultd/*.txtar: the scripts that need the
// real vaultd binary (built here and put on PATH) and, when it is built, the
// real cosign CLI ($MESHGEN_COSIGN, as `make test` sets it).
func TestVaultdScripts(t *testing.T) {
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/meshgen/meshgen/cmd/vaultd").CombinedOutput(); err != nil {
		t.Fatalf("build vaultd: %v\n%s", err, out)
	}
	path := bin
	if c := os.Getenv("MESHGEN_COSIGN"); c != "" {
		cosignDir := t.TempDir()
		if err := os.Symlink(c, filepath.Join(cosignDir, "cosign")); err != nil {
			t.Fatal(err)
		}
		path += string(os.PathListSeparator) + cosignDir
	}
	t.Setenv("PATH", path+string(os.PathListSeparator)+os.Getenv("PATH"))
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/vaultd",
		Setup: func(env *testscript.Env) error {
			env.Setenv("EXAMPLES", wd+"/../../examples")
			// A unix socket path is limited to 108 bytes: keep it short.
			d, err := os.MkdirTemp("", "vs")
			if err != nil {
				return err
			}
			env.Defer(func() { os.RemoveAll(d) })
			env.Setenv("SOCK", filepath.Join(d, "vault.sock"))
			for _, kv := range [][2]string{{"GIT_AUTHOR_NAME", "op"}, {"GIT_AUTHOR_EMAIL", "op@lab"}, {"GIT_COMMITTER_NAME", "op"}, {"GIT_COMMITTER_EMAIL", "op@lab"}, {"GIT_CONFIG_NOSYSTEM", "1"}} {
				env.Setenv(kv[0], kv[1])
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitvault": waitVault,
			"cosignkey": cosignKey,
			"waitref":   waitRef,
			"seal":      vaultSealCmd,
		},
	})
}

// cosignKey DIR makes reconciler.key (encrypted with $COSIGN_PASSWORD) and
// reconciler.pub in DIR, as genesis does.
func cosignKey(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: cosignkey DIR")
	}
	kp, err := sign.GenerateKeyPair([]byte(ts.Getenv(sign.PasswordEnv)))
	ts.Check(err)
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	ts.Check(os.WriteFile(filepath.Join(dir, "reconciler.key"), kp.Private, 0o600))
	ts.Check(os.WriteFile(filepath.Join(dir, "reconciler.pub"), kp.Public, 0o644))
}

// waitRef REPO REF FILE waits until REF of the git repository REPO exists
// and differs from the hash in FILE (empty: until it exists), for up to a
// minute.
func waitRef(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: waitref REPO REF FILE")
	}
	old := strings.TrimSpace(ts.ReadFile(args[2]))
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		out, err := exec.Command("git", "--git-dir="+ts.MkAbs(args[0]), "rev-parse", "--verify", "-q", args[1]).Output()
		if h := strings.TrimSpace(string(out)); err == nil && h != "" && h != old {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	ts.Fatalf("%s of %s did not move from %q within a minute", args[1], args[0], old)
}
