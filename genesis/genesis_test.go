package genesis

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	schema "github.com/meshgen/meshgen/catalog-schema"
	"github.com/meshgen/meshgen/internal/meshtest"
	"github.com/meshgen/meshgen/reconciler/sign"
	"github.com/meshgen/meshgen/vaultd/client"
)

var testPassword = []byte("correct horse battery staple")

// fakeVault holds an age identity like vaultd's and records what it was
// asked to adopt; it decrypts each value so tests can look for it elsewhere.
type fakeVault struct {
	id       *age.X25519Identity
	adopted  []client.AdoptSecret
	values   map[string][]byte
	adoptErr error
}

func newFakeVault(t *testing.T) *fakeVault {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return &fakeVault{id: id, values: map[string][]byte{}}
}

func (v *fakeVault) Recipient(context.Context) (string, error) {
	return v.id.Recipient().String(), nil
}

func (v *fakeVault) Adopt(_ context.Context, req client.AdoptRequest) (*client.AdoptResponse, error) {
	if v.adoptErr != nil {
		return nil, v.adoptErr
	}
	var resp client.AdoptResponse
	for _, s := range req.Secrets {
		r, err := age.Decrypt(bytes.NewReader(s.Ciphertext), v.id)
		if err != nil {
			return nil, err
		}
		value, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		v.adopted = append(v.adopted, s)
		v.values[s.Name] = value
		resp.Adopted = append(resp.Adopted, client.PutResponse{Name: s.Name, Version: 1})
	}
	return &resp, nil
}

func makeMesh(t *testing.T, v Vault) *Result {
	t.Helper()
	res, err := Make(context.Background(), Options{
		Home:     filepath.Join(t.TempDir(), "mesh"),
		Name:     "demo",
		Password: testPassword,
		Vault:    v,
		Now:      func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatalf("Make: %v", err)
	}
	return res
}

// git runs the real git on the mesh repository.
func gitOut(t *testing.T, repo string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestMakeWritesTheFirstCommit(t *testing.T) {
	t.Parallel()
	res := makeMesh(t, nil)

	// Real git accepts the repository and sees main as HEAD.
	gitOut(t, res.Repo, "fsck", "--strict")
	if got := strings.TrimSpace(gitOut(t, res.Repo, "symbolic-ref", "HEAD")); got != "refs/heads/main" {
		t.Errorf("HEAD = %q, want refs/heads/main", got)
	}
	if got := strings.TrimSpace(gitOut(t, res.Repo, "rev-parse", "main")); got != res.Commit {
		t.Errorf("main = %s, Result.Commit = %s", got, res.Commit)
	}
	if got := strings.TrimSpace(gitOut(t, res.Repo, "rev-parse", "--is-bare-repository")); got != "true" {
		t.Errorf("repository is not bare: %q", got)
	}
	files := strings.Fields(gitOut(t, res.Repo, "ls-tree", "-r", "--name-only", "main"))
	want := []string{
		"README.md",
		"assignments/.gitkeep",
		"catalog/contracts/.gitkeep",
		"catalog/modules/.gitkeep",
		"keys/reconciler.pub",
		"mesh.yaml",
		"nodes/.gitkeep",
	}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Errorf("files on main:\n got %v\nwant %v", files, want)
	}
	mesh := gitOut(t, res.Repo, "show", "main:mesh.yaml")
	for _, line := range []string{"name: demo", "root: " + DefaultRoot, "pollInterval: " + DefaultPollInterval} {
		if !strings.Contains(mesh, line) {
			t.Errorf("mesh.yaml lacks %q:\n%s", line, mesh)
		}
	}
	if n := strings.TrimSpace(gitOut(t, res.Repo, "rev-list", "--count", "--all")); n != "1" {
		t.Errorf("repository holds %s commits, want exactly the first one", n)
	}
	// Only the repository and the key are in the home.
	entries, err := os.ReadDir(res.Home)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != KeyFile+" "+RepoDir && strings.Join(names, " ") != RepoDir+" "+KeyFile {
		t.Errorf("home holds %v, want %s and %s", names, RepoDir, KeyFile)
	}
}

func TestSigningKeyIsEncryptedAndMatchesThePublicKey(t *testing.T) {
	t.Parallel()
	res := makeMesh(t, nil)

	fi, err := os.Stat(res.Key)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", fi.Mode().Perm())
	}
	home, err := os.Stat(res.Home)
	if err != nil {
		t.Fatal(err)
	}
	if home.Mode().Perm() != 0o755 {
		t.Errorf("home mode %v, want 0755: the repository is readable, the key is not", home.Mode().Perm())
	}
	private, err := os.ReadFile(res.Key)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(private)
	if block == nil || block.Type != "ENCRYPTED SIGSTORE PRIVATE KEY" {
		t.Fatalf("key is not an encrypted cosign key: %.60q", private)
	}
	// Encrypted: the wrong password does not open it.
	if _, err := sign.LoadSigner(private, []byte("wrong")); err == nil {
		t.Error("the key opened with the wrong password")
	}
	signer, err := sign.LoadSigner(private, testPassword)
	if err != nil {
		t.Fatalf("load key with its password: %v", err)
	}
	// The public half committed on main is the key's own.
	onMain := []byte(gitOut(t, res.Repo, "show", "main:"+PubFile))
	pub, err := signer.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onMain, pub) || !bytes.Equal(onMain, res.PublicKey) {
		t.Fatalf("keys/reconciler.pub on main is not the signing key's public half:\n%s\nvs\n%s", onMain, pub)
	}
	blob := []byte(`{"declaration":1}`)
	sig, err := signer.Sign(blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := sign.Verify(onMain, blob, sig); err != nil {
		t.Errorf("a signature by the key does not verify with keys/reconciler.pub: %v", err)
	}
}

// The real cosign reads the key genesis wrote (so it is cosign's encrypted
// format, opened with the password genesis was given) and its signature
// verifies with the keys/reconciler.pub genesis committed.
func TestCosignCLISignsWithTheGenesisKey(t *testing.T) {
	t.Parallel()
	cosign := meshtest.CosignCLI(t)
	res := makeMesh(t, nil)
	dir := t.TempDir()
	blob := []byte(`{"format":1,"mesh":"demo","node":"n1"}` + "\n")
	pub := []byte(gitOut(t, res.Repo, "show", "main:"+PubFile))
	for name, body := range map[string][]byte{"declaration.json": blob, "reconciler.pub": pub} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(password string, args ...string) {
		t.Helper()
		cmd := exec.Command(cosign, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+password)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cosign %s: %v\n%s", args[0], err, out)
		}
	}
	cmd := exec.Command(cosign, "sign-blob", "--key", res.Key, "--tlog-upload=false", "--yes", "--output-signature", "wrong.sig", "declaration.json")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=not the password")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("cosign opened the genesis key with the wrong password:\n%s", out)
	}
	run(string(testPassword), "sign-blob", "--key", res.Key, "--tlog-upload=false", "--yes", "--output-signature", "declaration.json.sig", "declaration.json")
	run("", "verify-blob", "--key", "reconciler.pub", "--insecure-ignore-tlog", "--signature", "declaration.json.sig", "declaration.json")
	sig, err := os.ReadFile(filepath.Join(dir, "declaration.json.sig"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sign.Verify(pub, blob, sig); err != nil {
		t.Errorf("cosign's signature with the genesis key does not verify with keys/reconciler.pub: %v", err)
	}
}

func TestMakeRefusesAnExistingMesh(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, home string)
	}{
		{"a mesh made before", func(t *testing.T, home string) {
			if _, err := Make(context.Background(), Options{Home: home, Name: "first", Password: testPassword}); err != nil {
				t.Fatal(err)
			}
		}},
		{"a folder holding a file", func(t *testing.T, home string) {
			if err := os.MkdirAll(home, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, "notes.txt"), []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a file", func(t *testing.T, home string) {
			if err := os.WriteFile(home, []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			home := filepath.Join(parent, "mesh")
			tt.setup(t, home)
			before := snapshot(t, parent)

			_, err := Make(context.Background(), Options{Home: home, Name: "second", Password: testPassword})
			if !errors.Is(err, ErrExists) {
				t.Fatalf("Make over %s: err = %v, want ErrExists", tt.name, err)
			}
			if after := snapshot(t, parent); after != before {
				t.Errorf("a refused genesis changed the disk:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestMakeInAnEmptyDirectory(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	res, err := Make(context.Background(), Options{Home: home, Name: "demo", Password: testPassword})
	if err != nil {
		t.Fatalf("Make in an empty directory: %v", err)
	}
	if _, err := git.PlainOpen(res.Repo); err != nil {
		t.Errorf("open the repository: %v", err)
	}
}

func TestMakeRefusesBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"upper-case name", Options{Name: "Demo", Password: testPassword}, `mesh name "Demo" is not valid`},
		{"empty name", Options{Name: "", Password: testPassword}, `mesh name "" is not valid`},
		{"name with a slash", Options{Name: "a/b", Password: testPassword}, `mesh name "a/b" is not valid`},
		{"empty password", Options{Name: "demo"}, "password is empty"},
		{"no directory", Options{Name: "demo", Password: testPassword, Home: "-"}, "no directory given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			switch tt.opts.Home {
			case "-":
				tt.opts.Home = ""
			default:
				tt.opts.Home = filepath.Join(parent, "mesh")
			}
			_, err := Make(context.Background(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
			if s := snapshot(t, parent); s != "" {
				t.Errorf("a refused genesis left files:\n%s", s)
			}
		})
	}
}

func TestVaultFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	v := newFakeVault(t)
	v.adoptErr = errors.New("vaultd: store is read-only")
	parent := t.TempDir()
	_, err := Make(context.Background(), Options{Home: filepath.Join(parent, "mesh"), Name: "demo", Password: testPassword, Vault: v})
	if err == nil || !strings.Contains(err.Error(), "deliver the foundation's first secrets to the vault") {
		t.Fatalf("err = %v, want the delivery failure", err)
	}
	if s := snapshot(t, parent); s != "" {
		t.Errorf("a failed genesis left files:\n%s", s)
	}
}

func TestGenesisDeliversExactlyTheFoundationSecrets(t *testing.T) {
	t.Parallel()
	v := newFakeVault(t)
	var out bytes.Buffer
	res := makeMesh(t, v)
	out.WriteString(strings.Join(res.Delivered, "\n"))

	var want []string
	for _, s := range FoundationSecrets() {
		want = append(want, s.Name)
	}
	var got []string
	for _, s := range v.adopted {
		got = append(got, s.Name)
		if s.Spec.Length != 43 || s.Spec.Alphabet != client.AlphabetBase64URL {
			t.Errorf("%s spec = %+v, want 43 base64url characters", s.Name, s.Spec)
		}
		if s.Spec.NotRotatable != "" || s.Spec.Operator {
			t.Errorf("%s is not the mesh's own (rotatable): %+v", s.Name, s.Spec)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || strings.Join(res.Delivered, ",") != strings.Join(want, ",") {
		t.Fatalf("adopted %v, reported %v; want exactly %v", got, res.Delivered, want)
	}
	value := v.values[EnrolmentToken]
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`).Match(value) {
		t.Fatalf("enrolment token is not 43 base64url characters (len %d)", len(value))
	}
	assertNowhere(t, res, value, out.Bytes())

	// A second mesh gets another token: nothing is fixed or derived.
	v2 := newFakeVault(t)
	makeMesh(t, v2)
	if bytes.Equal(v2.values[EnrolmentToken], value) {
		t.Error("two geneses made the same enrolment token")
	}
}

// assertNowhere fails when value appears in any file under the mesh's home,
// in any object of its repository (decompressed), or in output.
func assertNowhere(t *testing.T, res *Result, value []byte, output []byte) {
	t.Helper()
	if len(value) < 16 {
		t.Fatalf("value too short to look for (%d bytes)", len(value))
	}
	if bytes.Contains(output, value) {
		t.Error("the secret's value appears in the output")
	}
	err := filepath.Walk(res.Home, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, value) {
			t.Errorf("the secret's value appears in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	objects := gitOut(t, res.Repo, "cat-file", "--batch-all-objects", "--batch")
	if !strings.Contains(objects, "mesh.yaml") {
		t.Fatal("reading the repository's objects found no tree naming mesh.yaml: the search below would prove nothing")
	}
	if strings.Contains(objects, string(value)) {
		t.Error("the secret's value appears in an object of the mesh repository")
	}
}

// snapshot lists every path under dir with its size, sorted, for comparing
// the disk before and after.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		b.WriteString(rel)
		if !fi.IsDir() {
			fmt.Fprintf(&b, " %v %d", fi.Mode(), fi.Size())
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The go-git view agrees with git's: main's tree is readable in-process too.
func TestFirstCommitReadsWithGoGit(t *testing.T) {
	t.Parallel()
	res := makeMesh(t, nil)
	repo, err := git.PlainOpen(res.Repo)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.CommitObject(ref.Hash())
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.File("keys/reconciler.pub")
	if err != nil {
		t.Fatal(err)
	}
	body, err := f.Contents()
	if err != nil {
		t.Fatal(err)
	}
	if body != string(res.PublicKey) {
		t.Error("go-git reads another public key than genesis wrote")
	}
	if c.NumParents() != 0 || !strings.HasPrefix(c.Message, "genesis: mesh \"demo\"") {
		t.Errorf("first commit: parents %d, message %q", c.NumParents(), c.Message)
	}
}

// The repository genesis makes is a mesh the loader reads from main, and
// reads as empty: a name, defaults, and nothing else yet.
func TestFirstCommitLoads(t *testing.T) {
	t.Parallel()
	res := makeMesh(t, nil)
	repo, err := schema.LoadRef(res.Repo, "main")
	if err != nil {
		t.Fatalf("schema.LoadRef(main): %v", err)
	}
	if repo.Mesh.Name != "demo" || repo.Mesh.Defaults.Root != DefaultRoot || repo.Mesh.Defaults.PollInterval != DefaultPollInterval {
		t.Errorf("mesh.yaml read as %+v", repo.Mesh)
	}
	if len(repo.Nodes)+len(repo.Contracts)+len(repo.Modules)+len(repo.Assignments) != 0 {
		t.Errorf("a new mesh holds nodes %d, contracts %d, modules %d, assignments %d; want none",
			len(repo.Nodes), len(repo.Contracts), len(repo.Modules), len(repo.Assignments))
	}
	if repo.Source != res.Commit {
		t.Errorf("loaded from %s, want the first commit %s", repo.Source, res.Commit)
	}
}
