package branch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/reconciler/sign"
)

// testKey is one real cosign-format key pair per test binary: making one
// costs a second of scrypt.
var testKey = sync.OnceValues(func() (*sign.KeyPair, error) {
	return sign.GenerateKeyPair([]byte("test-password"))
})

func testSigner(t testing.TB) (*sign.Signer, []byte) {
	t.Helper()
	kp, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(kp.Private, []byte("test-password"))
	if err != nil {
		t.Fatal(err)
	}
	return s, kp.Public
}

// localRepo makes a real bare repository and opens it, and returns the
// options of a write signed by the test key, from source "aaa…".
func localRepo(t testing.TB) (string, *Repository, WriteOptions) {
	t.Helper()
	repo := bareRepo(t)
	signer, _ := testSigner(t)
	r, err := OpenLocal(repo)
	if err != nil {
		t.Fatal(err)
	}
	return repo, r, WriteOptions{Source: strings.Repeat("a", 40), Signer: signer}
}

// blobHash returns the hash git gives content as a blob, without storing it.
func blobHash(content []byte) plumbing.Hash {
	return plumbing.ComputeHash(plumbing.BlobObject, content)
}

// bareRepo makes a real bare repository with git itself.
func bareRepo(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mesh.git")
	gitRun(t, "", "init", "-q", "--bare", "-b", "main", dir)
	return dir
}

func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitOut(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func gitOut(dir string, args ...string) (string, error) {
	return gitIn(dir, "", args...)
}

// gitIn runs git in dir with stdin as its standard input.
func gitIn(dir, stdin string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Stdin = strings.NewReader(stdin)
	if dir != "" {
		cmd.Dir = dir
	}
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// testNode makes a node's declaration with one content file and n sealed
// secrets; content and the secrets' ciphertext vary with tag.
func testNode(name, tag string, secrets int) *Node {
	d := &declaration.Declaration{
		Format: declaration.Version, Mesh: "demo", Node: name,
		Resources: []declaration.Resource{{
			ID: "web/config", Kind: declaration.KindFile, Module: "web",
			File: &declaration.File{Path: "/var/lib/meshgen/web/app.ini", Mode: "0644", Content: "tag = " + tag + "\n"},
		}},
	}
	n := &Node{Declaration: d, Secrets: map[string][]byte{}}
	for i := range secrets {
		ct := fmt.Appendf(nil, "age-encryption.org/v1\n-> X25519 %s %s %d\n", name, tag, i)
		sum := sha256.Sum256(ct)
		sealed := "secrets/web-s" + strconv.Itoa(i) + ".age"
		d.Resources = append(d.Resources, declaration.Resource{
			ID: "web/s" + strconv.Itoa(i), Kind: declaration.KindFile, Module: "web",
			File: &declaration.File{Path: "/var/lib/meshgen/web/s" + strconv.Itoa(i), Mode: "0600",
				Secret: &declaration.SecretRef{Name: "web-s" + strconv.Itoa(i), Version: 1, Sealed: sealed, SHA256: hex.EncodeToString(sum[:])}},
		})
		n.Secrets[sealed] = ct
	}
	return n
}

// chain walks a branch's first-parent history from its tip and returns
// the commits, newest first, with the generation each declaration holds.
func chain(t testing.TB, repo, ref string) (commits []string, gens []uint64) {
	t.Helper()
	commits = strings.Fields(gitRun(t, repo, "rev-list", "--first-parent", ref))
	var in strings.Builder
	for _, c := range commits {
		in.WriteString(c + ":" + DeclarationFile + "\n")
	}
	cmd := exec.Command("git", "cat-file", "--batch")
	cmd.Dir = repo
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git cat-file --batch: %v", err)
	}
	for len(out) > 0 {
		header, rest, _ := strings.Cut(string(out), "\n")
		f := strings.Fields(header)
		if len(f) != 3 {
			t.Fatalf("git cat-file --batch: unexpected header %q", header)
		}
		size, _ := strconv.Atoi(f[2])
		d, err := declaration.Parse([]byte(rest[:size]))
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		gens = append(gens, d.Generation)
		out = []byte(rest[size+1:])
	}
	return commits, gens
}

// checkChain fails unless the branch's generations run down by one from its
// tip to 1, and every commit in want is on it: nothing was lost.
func checkChain(t testing.TB, repo, node string, want []string) {
	t.Helper()
	commits, gens := chain(t, repo, Ref(node))
	for i, g := range gens {
		if g != uint64(len(gens)-i) {
			t.Fatalf("node %s: generation at depth %d is %d, want %d (generations %v)", node, i, g, len(gens)-i, gens)
		}
	}
	on := map[string]bool{}
	for _, c := range commits {
		on[c] = true
	}
	for _, c := range want {
		if !on[c] {
			t.Errorf("node %s: written commit %s was lost (not on the branch)", node, c)
		}
	}
	if len(want) != len(commits) {
		t.Errorf("node %s: %d commits reported written, %d on the branch", node, len(want), len(commits))
	}
}

func sha256sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
