package branch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// randomBytes is incompressible content, like age ciphertext.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// packObjects builds objects of every kind the writer packs: compressible
// blobs, sealed blobs at the sizes where the entry header and zlib's stored
// blocks (at most 65,535 bytes each) change shape, trees and commits.
func packObjects(t *testing.T) *objects {
	t.Helper()
	objs := newObjects()
	b := objs.builder()
	for i, size := range []int{0, 1, 15, 16, 127, 128, 2047, 2048, 65535, 65536, 200_000} {
		ct := randomBytes(uint64(i), size)
		h := b.sealed(ct, blobHash(ct))
		decl := bytes.Repeat(fmt.Appendf(nil, "declaration %d of size %d\n", i, size), 1+size/30)
		tr := b.nodeTree(decl, []byte("sig"), map[string][]byte{"secrets/s.age": ct}, map[string]plumbing.Hash{"secrets/s.age": h})
		b.commit(tr, commitInfo{message: commitMessage("n", uint64(i+1), strings.Repeat("a", 40), "", false),
			when: time.Unix(1_700_000_000, 0), author: object.Signature{Name: "t", Email: "t@t"}})
	}
	return objs
}

// catFile reads hashes back with `git cat-file --batch`: type and content
// of each.
func catFile(t *testing.T, repo string, hashes []plumbing.Hash) map[plumbing.Hash]rawObject {
	t.Helper()
	var in strings.Builder
	for _, h := range hashes {
		in.WriteString(h.String() + "\n")
	}
	cmd := exec.Command("git", "cat-file", "--batch")
	cmd.Dir = repo
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git cat-file --batch: %v", err)
	}
	r := bufio.NewReader(bytes.NewReader(out))
	got := map[plumbing.Hash]rawObject{}
	for range hashes {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("git cat-file --batch: %v", err)
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("git cat-file --batch: %q", line)
		}
		size, _ := strconv.Atoi(f[2])
		data := make([]byte, size+1)
		if _, err := io.ReadFull(r, data); err != nil {
			t.Fatal(err)
		}
		typ, err := plumbing.ParseObjectType(f[1])
		if err != nil {
			t.Fatal(err)
		}
		got[plumbing.NewHash(f[0])] = rawObject{typ: typ, data: data[:size]}
	}
	return got
}

// checkPack has git verify the pack and index just written and read every
// object back, byte for byte, with git and with go-git; and has git index
// the pack itself: its index must be ours, byte for byte.
func checkPack(t *testing.T, repo string, sum plumbing.Hash, objs *objects) {
	t.Helper()
	base := filepath.Join(repo, "objects", "pack", "pack-"+sum.String())
	out := gitRun(t, repo, "verify-pack", "-v", base+".idx")
	if n := strings.Count(out, "\n"); n < len(objs.hashes) {
		t.Errorf("git verify-pack listed %d lines for %d objects:\n%s", n, len(objs.hashes), out)
	}
	gitRun(t, repo, "fsck", "--strict", "--full")

	got := catFile(t, repo, objs.hashes)
	l := &local{path: repo}
	s, closeS := l.view()
	defer closeS()
	for _, h := range objs.hashes {
		want, _ := objs.get(h)
		if g := got[h]; g.typ != want.typ || !bytes.Equal(g.data, want.data) {
			t.Errorf("git cat-file %s: %s of %d bytes, want %s of %d bytes", h, g.typ, len(g.data), want.typ, len(want.data))
		}
		o, err := s.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			t.Errorf("go-git reads %s: %v", h, err)
			continue
		}
		r, _ := o.Reader()
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil || o.Type() != want.typ || !bytes.Equal(data, want.data) {
			t.Errorf("go-git reads %s: %s of %d bytes (%v), want %s of %d bytes", h, o.Type(), len(data), err, want.typ, len(want.data))
		}
	}

	// git index-pack makes the same index from the pack alone.
	scratch := t.TempDir()
	pack, err := os.ReadFile(base + ".pack")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "p.pack"), pack, 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, scratch, "index-pack", "--index-version=2", "-o", "p.idx", "p.pack")
	theirs, err := os.ReadFile(filepath.Join(scratch, "p.idx"))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := os.ReadFile(base + ".idx")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, theirs) {
		t.Errorf("our index of the pack (%d bytes) differs from git index-pack's (%d bytes)", len(ours), len(theirs))
	}
}

func TestPackfileGitReadsBack(t *testing.T) {
	repo := bareRepo(t)
	objs := packObjects(t)
	sum, err := writePackfile(repo, objs, objs.hashes)
	if err != nil {
		t.Fatal(err)
	}
	checkPack(t, repo, sum, objs)
	left, _ := filepath.Glob(filepath.Join(repo, "objects", "pack", "tmp_*"))
	if len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	for _, ext := range []string{".pack", ".idx"} {
		st, err := os.Stat(filepath.Join(repo, "objects", "pack", "pack-"+sum.String()+ext))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o444 {
			t.Errorf("%s is mode %v, want read-only for all as git leaves packs", ext, st.Mode().Perm())
		}
	}
	// Writing the same pack again (a retry whose objects came out the
	// same) replaces it with itself.
	again, err := writePackfile(repo, objs, objs.hashes)
	if err != nil || again != sum {
		t.Fatalf("second write of the same pack: %s, %v; want %s", again, err, sum)
	}
	checkPack(t, repo, sum, objs)
}

// TestPackIndexFanout: objects whose names start with every byte value,
// so every slot of the index's fan-out table counts, and git and go-git
// find each.
func TestPackIndexFanout(t *testing.T) {
	repo := bareRepo(t)
	objs := newObjects()
	ob := objs.builder()
	var first [256]bool
	covered := 0
	for i := 0; covered < 256; i++ {
		b := fmt.Appendf(nil, "object %d\n", i)
		h := ob.blob(b)
		if !first[h[0]] {
			first[h[0]] = true
			covered++
		}
	}
	sum, err := writePackfile(repo, objs, objs.hashes)
	if err != nil {
		t.Fatal(err)
	}
	checkPack(t, repo, sum, objs)
}

// TestPackIndexLargeOffsets: entries at 2 GiB and beyond go to the table of
// 64-bit offsets, and go-git's decoder reads every offset and CRC back. (A
// real pack of that size is not written here.)
func TestPackIndexLargeOffsets(t *testing.T) {
	offsets := []uint64{12, 1<<31 - 1, 1 << 31, 5 << 30, 1 << 40}
	var entries []packEntry
	for i, off := range offsets {
		entries = append(entries, packEntry{hash: plumbing.ComputeHash(plumbing.BlobObject, []byte{byte(i)}), offset: off, crc: uint32(i) * 7})
	}
	sum := plumbing.ComputeHash(plumbing.BlobObject, []byte("pack"))
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bytes.NewReader(encodeIndex(entries, sum))).Decode(idx); err != nil {
		t.Fatal(err)
	}
	if idx.PackfileChecksum != sum {
		t.Errorf("pack checksum %s, want %s", idx.PackfileChecksum, sum)
	}
	for _, e := range entries {
		off, err := idx.FindOffset(e.hash)
		if err != nil || uint64(off) != e.offset {
			t.Errorf("offset of %s: %d (%v), want %d", e.hash, off, err, e.offset)
		}
		crc, err := idx.FindCRC32(e.hash)
		if err != nil || crc != e.crc {
			t.Errorf("crc of %s: %d (%v), want %d", e.hash, crc, err, e.crc)
		}
	}
	if len(idx.Offset64) != 3*8 {
		t.Errorf("%d bytes of 64-bit offsets, want 3 entries", len(idx.Offset64))
	}
}

func TestObjectHeader(t *testing.T) {
	for _, tc := range []struct {
		typ  plumbing.ObjectType
		size uint64
		want []byte
	}{
		{plumbing.BlobObject, 0, []byte{0x30}},
		{plumbing.BlobObject, 15, []byte{0x3f}},
		{plumbing.CommitObject, 16, []byte{0x90, 0x01}},
		{plumbing.TreeObject, 2047, []byte{0xaf, 0x7f}},
		{plumbing.BlobObject, 2048, []byte{0xb0, 0x80, 0x01}},
	} {
		if got := objectHeader(nil, tc.typ, tc.size); !bytes.Equal(got, tc.want) {
			t.Errorf("header of %s of %d bytes: % x, want % x", tc.typ, tc.size, got, tc.want)
		}
	}
}

// TestPackReadableInProcess: after a write, the same process reads what it
// wrote through every way it reads the repository — the writer's own next
// write (which must find the objects and change nothing), a storage
// opened before the write and one after, and OpenGit.
func TestPackReadableInProcess(t *testing.T) {
	ctx := context.Background()
	repo, r, opts := localRepo(t)
	nodes := map[string]*Node{"n1": testNode("n1", "a", 3), "n2": testNode("n2", "a", 1)}
	l := &local{path: repo}
	// Opened before the write, its pack indexes not loaded yet. (A go-git
	// storage that has loaded them keeps them and sees no later pack
	// unless Reindexed: the writer opens a storage per snapshot, and
	// OpenGit's callers one per read.)
	before := l.storage()
	defer before.Close()
	res, err := r.Write(ctx, nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := OpenGit(repo)
	if err != nil {
		t.Fatal(err)
	}
	after := l.storage()
	defer after.Close()
	for _, nr := range res.Nodes {
		for name, s := range map[string]storer.EncodedObjectStorer{"OpenGit": g.Storer, "a storage opened before": before, "a fresh storage": after} {
			c, err := object.GetCommit(s, plumbing.NewHash(nr.Commit))
			if err != nil {
				t.Errorf("%s: node %s: %v", name, nr.Node, err)
				continue
			}
			tree, err := c.Tree()
			if err != nil {
				t.Errorf("%s: node %s: %v", name, nr.Node, err)
				continue
			}
			for p, ct := range nodes[nr.Node].Secrets {
				f, err := tree.File(p)
				if err != nil {
					t.Errorf("%s: node %s: %s: %v", name, nr.Node, p, err)
					continue
				}
				if got, _ := f.Contents(); got != string(ct) {
					t.Errorf("%s: node %s: %s differs", name, nr.Node, p)
				}
				if f.Mode != filemode.Regular {
					t.Errorf("%s: node %s: %s has mode %v", name, nr.Node, p, f.Mode)
				}
			}
		}
	}
	res, err = r.Write(ctx, nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed()) != 0 || res.Objects != 0 {
		t.Fatalf("the same write again changed %v and wrote %d objects", res.Changed(), res.Objects)
	}
}

// TestWriterKilled kills writer processes with SIGKILL at varying points of
// their writes (planning, packing, syncing, moving refs): the repository
// must pass `git fsck` after each, every branch must hold an unbroken chain
// of generations, and the next write must work.
func TestWriterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("kills writer processes")
	}
	repo := bareRepo(t)
	kp, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for i := range 60 {
		nodes = append(nodes, fmt.Sprintf("k%02d", i))
	}
	for kill := range 8 {
		spec, _ := json.Marshal(writerSpec{Repo: repo, Key: string(kp.Private), Writer: kill, Rounds: 1000, Nodes: nodes, Secrets: 20})
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+string(spec))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Let it finish a round, so refs exist. Then kill it either as
		// soon as it starts writing a pack (a tmp_pack_ file appears) or
		// a varying time into its next rounds.
		if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
			t.Fatalf("writer %d: %v", kill, err)
		}
		if kill%2 == 0 {
			waitForTmpPack(t, repo)
		} else {
			time.Sleep(time.Duration(kill*13) * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		go io.Copy(io.Discard, stdout)
		cmd.Wait()
		gitRun(t, repo, "fsck", "--strict", "--full")
		// A ref lock the writer held stays behind, as git's would: the
		// operator removes it (ConflictError says so).
		locks, _ := filepath.Glob(filepath.Join(repo, "refs", "heads", "node", "*.lock"))
		for _, l := range locks {
			t.Logf("kill %d left %s", kill, filepath.Base(l))
			os.Remove(l)
		}
		tmps, _ := filepath.Glob(filepath.Join(repo, "objects", "pack", "tmp_*"))
		t.Logf("kill %d left %d temporary pack files", kill, len(tmps))
		for _, n := range nodes[:3] {
			_, gens := chain(t, repo, Ref(n))
			for i, g := range gens {
				if g != uint64(len(gens)-i) {
					t.Fatalf("after kill %d: node %s: generations %v", kill, n, gens)
				}
			}
		}
	}
	signer, _ := testSigner(t)
	r, err := OpenLocal(repo)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]*Node{}
	for _, n := range nodes {
		set[n] = testNode(n, "after", 2)
	}
	if _, err := r.Write(context.Background(), set, WriteOptions{Source: strings.Repeat("e", 40), Signer: signer}); err != nil {
		t.Fatalf("write after the kills: %v", err)
	}
	gitRun(t, repo, "fsck", "--strict", "--full")
}

// waitForTmpPack returns once a writer has begun a pack in repo.
func waitForTmpPack(t *testing.T, repo string) {
	t.Helper()
	dir := filepath.Join(repo, "objects", "pack")
	for start := time.Now(); time.Since(start) < time.Minute; {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "tmp_pack_") {
				return
			}
		}
	}
	t.Fatal("the writer began no pack in a minute")
}

// TestMissingSeesLooseObjects: an object git stored loose (a small push
// unpacked by receive-pack) is found, so it is not written again, while
// absent ones are answered without go-billy's path walk.
func TestMissingSeesLooseObjects(t *testing.T) {
	repo := bareRepo(t)
	cmd := exec.Command("git", "hash-object", "-w", "--stdin")
	cmd.Dir = repo
	cmd.Stdin = strings.NewReader("loose\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git hash-object: %v", err)
	}
	loose := plumbing.NewHash(strings.TrimSpace(string(out)))
	objs := newObjects()
	b := objs.builder()
	if h := b.blob([]byte("loose\n")); h != loose {
		t.Fatalf("blob hash %s, git says %s", h, loose)
	}
	absent := b.blob([]byte("absent\n"))
	s, closeS := (&local{path: repo}).view()
	defer closeS()
	missing, err := objs.missing(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || missing[0] != absent {
		t.Fatalf("missing %v, want only %s", missing, absent)
	}
}

// TestViewListsLooseObjectsOnce: a view lists the loose objects when it is
// opened; one written later is taken for missing and packed again, which
// git accepts (the object is then both loose and packed).
func TestViewListsLooseObjectsOnce(t *testing.T) {
	repo := bareRepo(t)
	s, closeS := (&local{path: repo}).view()
	defer closeS()
	cmd := exec.Command("git", "hash-object", "-w", "--stdin")
	cmd.Dir = repo
	cmd.Stdin = strings.NewReader("late\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git hash-object: %v", err)
	}
	objs := newObjects()
	late := objs.builder().blob([]byte("late\n"))
	if late.String() != strings.TrimSpace(string(out)) {
		t.Fatalf("blob hash %s, git says %s", late, out)
	}
	missing, err := objs.missing(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || missing[0] != late {
		t.Fatalf("missing %v, want the object written after the view was opened, %s", missing, late)
	}
	sum, err := writePackfile(repo, objs, missing)
	if err != nil {
		t.Fatal(err)
	}
	checkPack(t, repo, sum, objs)
}

func TestIsLooseObject(t *testing.T) {
	h := strings.Repeat("ab", 20)
	for name, want := range map[string]bool{
		"objects/" + h[:2] + "/" + h[2:]:          true,
		"objects/" + h[:2] + "/" + h[2:] + ".tmp": false,
		"objects/pack/pack-" + h + ".idx":         false,
		"objects/info/alternates":                 false,
		"objects/zz/" + strings.Repeat("z", 38):   false,
		"refs/" + h[:2] + "/" + h[2:]:             false,
	} {
		if got := isLooseObject(name); got != want {
			t.Errorf("isLooseObject(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestPackWithoutIndexIgnored: a .pack whose .idx is not in place yet (git
// receive-pack renames the .pack first) is left out of go-git's listing, so
// reads of every other pack keep working.
func TestPackWithoutIndexIgnored(t *testing.T) {
	repo := bareRepo(t)
	objs := packObjects(t)
	sum, err := writePackfile(repo, objs, objs.hashes)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, "objects", "pack")
	pack, err := os.ReadFile(filepath.Join(dir, "pack-"+sum.String()+".pack"))
	if err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(dir, "pack-"+strings.Repeat("1", 40)+".pack")
	if err := os.WriteFile(half, pack, 0o444); err != nil {
		t.Fatal(err)
	}
	g, err := OpenGit(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range objs.hashes {
		if _, err := g.Storer.EncodedObject(plumbing.AnyObject, h); err != nil {
			t.Fatalf("read %s beside a pack without its index: %v", h, err)
		}
	}
}
