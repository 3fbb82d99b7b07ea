package branch

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/reconciler/sign"
)

func packCount(t *testing.T, repo string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(repo, "objects", "pack", "*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func outcomes(res *Result) map[string]Outcome {
	out := map[string]Outcome{}
	for _, n := range res.Nodes {
		out[n.Node] = n.Outcome
	}
	return out
}

func TestWriteLocal(t *testing.T) {
	ctx := context.Background()
	repo := bareRepo(t)
	signer, pub := testSigner(t)
	r, err := OpenLocal(repo)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*Node{"n1": testNode("n1", "a", 2), "n2": testNode("n2", "a", 0), "n3": testNode("n3", "a", 3)}
	when := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	opts := WriteOptions{Source: strings.Repeat("a", 40), Signer: signer, Now: func() time.Time { return when }}

	// First write: every branch is made at generation 1, in one packfile.
	res, err := r.Write(ctx, nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Changed(); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("first write changed %v", got)
	}
	if n := packCount(t, repo); n != 1 {
		t.Errorf("first write made %d packfiles, want 1", n)
	}
	gitRun(t, repo, "fsck", "--strict", "--no-dangling")
	for name, n := range nodes {
		body := gitRun(t, repo, "cat-file", "blob", "node/"+name+":"+DeclarationFile)
		d, err := declaration.Parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if d.Generation != 1 || d.Source != opts.Source {
			t.Errorf("%s: generation %d source %q, want 1 and %q", name, d.Generation, d.Source, opts.Source)
		}
		sig := gitRun(t, repo, "cat-file", "blob", "node/"+name+":"+SignatureFile)
		if err := sign.Verify(pub, []byte(body), []byte(sig)); err != nil {
			t.Errorf("%s: signature: %v", name, err)
		}
		for p, ct := range n.Secrets {
			if got := gitRun(t, repo, "cat-file", "blob", "node/"+name+":"+p); got != string(ct) {
				t.Errorf("%s: %s holds %q, want %q", name, p, got, ct)
			}
		}
		msg := gitRun(t, repo, "log", "-1", "--format=%B", "node/"+name)
		if !strings.Contains(msg, "generation 1") || !strings.Contains(msg, "Source: "+opts.Source) {
			t.Errorf("%s: commit message %q names no generation or source", name, msg)
		}
	}
	before := gitRun(t, repo, "for-each-ref", "refs/heads/node")

	// The same content rendered from another commit of main commits nothing
	// and writes no object.
	opts.Source = strings.Repeat("b", 40)
	res, err = r.Write(ctx, nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed()) != 0 || res.Objects != 0 {
		t.Fatalf("unchanged write changed %v and wrote %d objects", res.Changed(), res.Objects)
	}
	if after := gitRun(t, repo, "for-each-ref", "refs/heads/node"); after != before {
		t.Fatalf("unchanged write moved refs:\n%s\n%s", before, after)
	}
	if n := packCount(t, repo); n != 1 {
		t.Errorf("unchanged write made a packfile (%d now)", n)
	}

	// One node's secret ciphertext changes: only its branch moves, to
	// generation 2, on top of generation 1.
	changed := testNode("n3", "a", 3)
	changed.Secrets["secrets/web-s1.age"] = []byte("age-encryption.org/v1\nnew\n")
	sum := sha256sum(changed.Secrets["secrets/web-s1.age"])
	changed.Declaration.Resources[2].File.Secret.SHA256 = sum
	changed.Declaration.Resources[2].File.Secret.Version = 2
	nodes["n3"] = changed
	res, err = r.Write(ctx, nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Outcome{"n1": Unchanged, "n2": Unchanged, "n3": Written}
	if got := outcomes(res); !mapsEqual(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	checkChain(t, repo, "n3", twoWrites(res, "n3", gitRun(t, repo, "rev-parse", "node/n3~1")))
	// Objects already in the repository (the other secrets, unchanged
	// blobs) were not written again: a declaration, a signature, a secret,
	// two trees and a commit.
	if res.Objects != 6 {
		t.Errorf("one-secret change wrote %d objects, want 6", res.Objects)
	}
	gitRun(t, repo, "fsck", "--strict", "--no-dangling")
}

// twoWrites returns the commits a branch must hold after two writes: the first
// (given) and the one res reports for node.
func twoWrites(res *Result, node, first string) []string {
	out := []string{strings.TrimSpace(first)}
	for _, n := range res.Nodes {
		if n.Node == node {
			out = append(out, n.Commit)
		}
	}
	return out
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func TestWriteRefusesInconsistentNodes(t *testing.T) {
	signer, _ := testSigner(t)
	r, err := OpenLocal(bareRepo(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		mutate  func(n *Node)
		wantErr string
	}{
		{"declaration for another node", func(n *Node) { n.Declaration.Node = "n9" }, `declaration is for node "n9"`},
		{"sealed file missing", func(n *Node) { delete(n.Secrets, "secrets/web-s0.age") }, "which is not given"},
		{"sealed file altered", func(n *Node) { n.Secrets["secrets/web-s0.age"] = []byte("other") }, "does not match its sha256"},
		{"sealed file named by nothing", func(n *Node) { n.Secrets["secrets/stray.age"] = []byte("x") }, "named by no resource"},
		{"invalid declaration", func(n *Node) { n.Declaration.Resources[0].File.Mode = "rwx" }, "not an octal mode"},
		{"removed node declaring resources", func(n *Node) { n.Removed = true }, "removed from the mesh, yet its declaration holds 2 resources"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := testNode("n1", "a", 1)
			tt.mutate(n)
			_, err := r.Write(context.Background(), map[string]*Node{"n1": n}, WriteOptions{Source: "s", Signer: signer})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// TestWriteSuperseded: a render of an older commit of main never undoes a
// render of a newer one, even though it is different content.
func TestWriteSuperseded(t *testing.T) {
	ctx := context.Background()
	repo := bareRepo(t)
	work := t.TempDir()
	gitRun(t, "", "clone", "-q", repo, work)
	var commits []string
	for i := range 2 {
		gitRun(t, work, "commit", "-q", "--allow-empty", "-m", fmt.Sprint("main ", i))
		commits = append(commits, strings.TrimSpace(gitRun(t, work, "rev-parse", "HEAD")))
	}
	gitRun(t, work, "push", "-q", "origin", "HEAD:main")
	signer, _ := testSigner(t)
	r, err := OpenLocal(repo)
	if err != nil {
		t.Fatal(err)
	}
	newer := WriteOptions{Source: commits[1], Signer: signer}
	older := WriteOptions{Source: commits[0], Signer: signer}
	if _, err := r.Write(ctx, map[string]*Node{"n1": testNode("n1", "new", 1)}, newer); err != nil {
		t.Fatal(err)
	}
	res, err := r.Write(ctx, map[string]*Node{"n1": testNode("n1", "old", 1)}, older)
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res)["n1"]; got != Superseded {
		t.Fatalf("older render: outcome %s, want superseded", got)
	}
	// A newer render than the branch's is written.
	res, err = r.Write(ctx, map[string]*Node{"n1": testNode("n1", "old", 1)}, newer)
	if err != nil || outcomes(res)["n1"] != Written {
		t.Fatalf("same-source render: %v, %v", res, err)
	}
}

// racers runs writers concurrently, each doing rounds of writes of its own
// content to every node, and returns every commit reported written per node.
func racers(t *testing.T, writers, rounds int, nodes []string, write func(w, round int, nodes map[string]*Node) (*Result, error)) map[string][]string {
	t.Helper()
	var mu sync.Mutex
	written := map[string][]string{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for round := range rounds {
				set := map[string]*Node{}
				for _, n := range nodes {
					set[n] = testNode(n, fmt.Sprintf("w%d-r%d", w, round), 1)
				}
				res, err := write(w, round, set)
				if err != nil {
					t.Errorf("writer %d round %d: %v", w, round, err)
					return
				}
				mu.Lock()
				for _, nr := range res.Nodes {
					if nr.Outcome != Written {
						t.Errorf("writer %d round %d: node %s %s, want written (its content is new)", w, round, nr.Node, nr.Outcome)
					}
					written[nr.Node] = append(written[nr.Node], nr.Commit)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return written
}

func TestRacingWritersInGoroutines(t *testing.T) {
	repo := bareRepo(t)
	signer, _ := testSigner(t)
	nodes := []string{"n1", "n2", "n3", "n4"}
	written := racers(t, 4, 12, nodes, func(_, _ int, set map[string]*Node) (*Result, error) {
		r, err := OpenLocal(repo)
		if err != nil {
			return nil, err
		}
		return r.Write(context.Background(), set, WriteOptions{Source: strings.Repeat("c", 40), Signer: signer})
	})
	for _, n := range nodes {
		checkChain(t, repo, n, written[n])
	}
	gitRun(t, repo, "fsck", "--strict")
}

// The child side of TestRacingWritersInProcesses: a writer process.
const writerEnv = "MESHGEN_BRANCH_TEST_WRITER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(writerEnv); spec != "" {
		os.Exit(writerProcess(spec))
	}
	os.Exit(m.Run())
}

type writerSpec struct {
	Repo, Key string
	Writer    int
	Rounds    int
	Nodes     []string
	Secrets   int // sealed files per node; 1 when 0
}

func writerProcess(spec string) int {
	var s writerSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	signer, err := sign.LoadSigner([]byte(s.Key), []byte("test-password"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	enc := json.NewEncoder(os.Stdout)
	for round := range s.Rounds {
		set := map[string]*Node{}
		for _, n := range s.Nodes {
			set[n] = testNode(n, fmt.Sprintf("p%d-r%d", s.Writer, round), max(s.Secrets, 1))
		}
		r, err := OpenLocal(s.Repo)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		res, err := r.Write(context.Background(), set, WriteOptions{Source: strings.Repeat("d", 40), Signer: signer})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, nr := range res.Nodes {
			enc.Encode(nr)
		}
	}
	return 0
}

// TestRacingWritersInProcesses races separate processes on one bare
// repository while git itself packs the refs underneath them.
func TestRacingWritersInProcesses(t *testing.T) {
	repo := bareRepo(t)
	kp, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	nodes := []string{"n1", "n2", "n3"}
	const writers, rounds = 4, 10
	done := make(chan struct{})
	var packer sync.WaitGroup
	packer.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				gitOut(repo, "pack-refs", "--all")
				time.Sleep(5 * time.Millisecond)
			}
		}
	})
	var wg sync.WaitGroup
	outs := make([][]byte, writers)
	for w := range writers {
		spec, _ := json.Marshal(writerSpec{Repo: repo, Key: string(kp.Private), Writer: w, Rounds: rounds, Nodes: nodes})
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), writerEnv+"="+string(spec))
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("writer process %d: %v\n%s", w, err, stderr.String())
			}
			outs[w] = out
		})
	}
	wg.Wait()
	close(done)
	packer.Wait()
	written := map[string][]string{}
	for _, out := range outs {
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for dec.More() {
			var nr NodeResult
			if err := dec.Decode(&nr); err != nil {
				t.Fatal(err)
			}
			if nr.Outcome != Written {
				t.Errorf("node %s: %s, want written", nr.Node, nr.Outcome)
			}
			written[nr.Node] = append(written[nr.Node], nr.Commit)
		}
	}
	for _, n := range nodes {
		if len(written[n]) != writers*rounds {
			t.Errorf("node %s: %d writes reported, want %d", n, len(written[n]), writers*rounds)
		}
		checkChain(t, repo, n, written[n])
	}
	gitRun(t, repo, "fsck", "--strict")
}

// TestWriteManyNodes writes enough nodes that they are planned on several
// goroutines, each with its own builder, and reads every file back with git;
// a second write of the same nodes writes nothing, and a third, with every
// third node changed, writes exactly those.
func TestWriteManyNodes(t *testing.T) {
	ctx := context.Background()
	repo, r, opts := localRepo(t)
	nodes := map[string]*Node{}
	for i := range 300 {
		name := fmt.Sprintf("n%03d", i)
		nodes[name] = testNode(name, "a", i%4)
	}
	res, err := r.Write(ctx, nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed()) != len(nodes) {
		t.Fatalf("first write changed %d of %d nodes", len(res.Changed()), len(nodes))
	}
	gitRun(t, repo, "fsck", "--strict", "--no-dangling")
	var in strings.Builder
	var want []string
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		d := *nodes[name].Declaration
		d.Generation, d.Source = 1, opts.Source
		body, err := declaration.Marshal(&d)
		if err != nil {
			t.Fatal(err)
		}
		in.WriteString("node/" + name + ":" + DeclarationFile + "\n")
		want = append(want, string(body))
		for _, p := range slices.Sorted(maps.Keys(nodes[name].Secrets)) {
			in.WriteString("node/" + name + ":" + p + "\n")
			want = append(want, string(nodes[name].Secrets[p]))
		}
	}
	out, err := gitIn(repo, in.String(), "cat-file", "--batch")
	if err != nil {
		t.Fatalf("git cat-file --batch: %v", err)
	}
	for i, w := range want {
		header, rest, _ := strings.Cut(out, "\n")
		f := strings.Fields(header)
		if len(f) != 3 {
			t.Fatalf("git cat-file --batch: %q", header)
		}
		size, _ := strconv.Atoi(f[2])
		if got := rest[:size]; got != w {
			t.Fatalf("file %d read back as %q, want %q", i, got, w)
		}
		out = rest[size+1:]
	}

	res, err = r.Write(ctx, nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed()) != 0 || res.Objects != 0 {
		t.Fatalf("unchanged write changed %d nodes, wrote %d objects", len(res.Changed()), res.Objects)
	}
	var changed []string
	for i, name := range slices.Sorted(maps.Keys(nodes)) {
		if i%3 == 0 {
			nodes[name] = testNode(name, "b", i%4)
			changed = append(changed, name)
		}
	}
	res, err = r.Write(ctx, nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Changed(); !slices.Equal(got, changed) {
		t.Fatalf("changed %d nodes, want the %d given", len(got), len(changed))
	}
	gitRun(t, repo, "fsck", "--strict", "--no-dangling")
}
