package branch

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/meshgen/meshgen/hostd/declaration"
	"github.com/meshgen/meshgen/internal/benchcpu"
)

// benchMesh makes 1,000 nodes, each with 20 assignments' worth of resources
// (a directory, a config file, a sealed secret file and a container each).
func benchMesh(tag string) map[string]*Node {
	nodes := map[string]*Node{}
	for i := range 1000 {
		name := fmt.Sprintf("n%04d", i)
		n := testNode(name, tag, 20)
		for a := range 20 {
			mod := fmt.Sprintf("m%02d", a)
			n.Declaration.Resources = append(n.Declaration.Resources,
				declaration.Resource{ID: mod + "/data", Kind: declaration.KindDirectory, Module: mod,
					Directory: &declaration.Directory{Path: "/var/lib/meshgen/" + mod + "/data", Mode: "0750"}},
				declaration.Resource{ID: mod + "/config", Kind: declaration.KindFile, Module: mod,
					File: &declaration.File{Path: "/var/lib/meshgen/" + mod + "/app.ini", Mode: "0644",
						Content: strings.Repeat("key = value\n", 10)}},
				declaration.Resource{ID: mod + "/app", Kind: declaration.KindContainer, Module: mod,
					Container: &declaration.Container{Name: mod + "-" + name,
						Image: "registry.local/" + mod + "@sha256:" + strings.Repeat("ab", 32),
						Env:   map[string]string{"MODE": "prod"}, RestartOn: []string{mod + "/config"},
						Mounts: []declaration.Mount{{Source: "/var/lib/meshgen/" + mod + "/data", Target: "/data"}}}},
			)
		}
		nodes[name] = n
	}
	return nodes
}

func BenchmarkWrite1000Nodes(b *testing.B) {
	ctx := context.Background()
	signer, _ := testSigner(b)
	base := benchMesh("a")
	opts := WriteOptions{Source: strings.Repeat("a", 40), Signer: signer}

	b.Run("first", func(b *testing.B) {
		defer benchcpu.Report(b)()
		var size int64
		for b.Loop() {
			b.StopTimer()
			repo := bareRepo(b)
			r, err := OpenLocal(repo)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := r.Write(ctx, base, opts); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			size = packBytes(b, repo)
			b.StartTimer()
		}
		b.ReportMetric(float64(size), "pack-bytes")
	})

	repo := bareRepo(b)
	r, err := OpenLocal(repo)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.Write(ctx, base, opts); err != nil {
		b.Fatal(err)
	}
	b.Run("no-change", func(b *testing.B) {
		defer benchcpu.Report(b)()
		for b.Loop() {
			res, err := r.Write(ctx, base, opts)
			if err != nil {
				b.Fatal(err)
			}
			if res.Objects != 0 || len(res.Changed()) != 0 {
				b.Fatalf("no-change write wrote %d objects", res.Objects)
			}
		}
	})
	b.Run("one-node-change", func(b *testing.B) {
		defer benchcpu.Report(b)()
		i := 0
		for b.Loop() {
			i++
			b.StopTimer()
			changed := map[string]*Node{}
			for k, v := range base {
				changed[k] = v
			}
			changed["n0500"] = testNode("n0500", fmt.Sprint("change-", i), 20)
			b.StartTimer()
			res, err := r.Write(ctx, changed, opts)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Changed()) != 1 {
				b.Fatalf("changed %v", res.Changed())
			}
		}
	})

	// git fast-import writing the same files as one commit per branch: the
	// practical limit for writing these objects.
	b.Run("git-fast-import", func(b *testing.B) {
		var stream bytes.Buffer
		for name, n := range base {
			d := *n.Declaration
			d.Generation, d.Source = 1, opts.Source
			body, err := declaration.Marshal(&d)
			if err != nil {
				b.Fatal(err)
			}
			sig, _ := signer.Sign(body)
			fmt.Fprintf(&stream, "commit refs/heads/node/%s\ncommitter r <r@r> 1700000000 +0000\ndata 2\nx\n", name)
			inline := func(path string, content []byte) {
				fmt.Fprintf(&stream, "M 100644 inline %s\ndata %d\n", path, len(content))
				stream.Write(content)
				stream.WriteByte('\n')
			}
			inline(DeclarationFile, body)
			inline(SignatureFile, sig)
			for p, ct := range n.Secrets {
				inline(p, ct)
			}
			stream.WriteByte('\n')
		}
		var cpu time.Duration
		for b.Loop() {
			b.StopTimer()
			dir := bareRepo(b)
			b.StartTimer()
			cmd := exec.Command("git", "fast-import", "--quiet")
			cmd.Dir = dir
			cmd.Stdin = bytes.NewReader(stream.Bytes())
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("git fast-import: %v\n%s", err, out)
			}
			cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}

// BenchmarkPackSealed packs 20,000 real age ciphertexts (a 32-byte secret
// each, to an X25519 recipient, as vaultd seals) stored (zlib level 0, what
// the writer does) and deflated at BestSpeed, reporting the pack's size.
func BenchmarkPackSealed(b *testing.B) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}
	var cts [][]byte
	for i := range 20000 {
		var buf bytes.Buffer
		w, err := age.Encrypt(&buf, id.Recipient())
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(w, "secret-%027d", i)
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		cts = append(cts, buf.Bytes())
	}
	for _, mode := range []string{"stored", "best-speed"} {
		b.Run(mode, func(b *testing.B) {
			var size int64
			for b.Loop() {
				b.StopTimer()
				repo := bareRepo(b)
				b.StartTimer()
				objs := newObjects()
				ob := objs.builder()
				for _, ct := range cts {
					if mode == "stored" {
						ob.sealed(ct, blobHash(ct))
					} else {
						ob.blob(ct)
					}
				}
				sum, err := writePackfile(repo, objs, objs.hashes)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				st, err := os.Stat(filepath.Join(repo, "objects", "pack", "pack-"+sum.String()+".pack"))
				if err != nil {
					b.Fatal(err)
				}
				size = st.Size()
				b.StartTimer()
			}
			b.ReportMetric(float64(size), "pack-bytes")
		})
	}
}

// BenchmarkPlan1000Nodes plans writes of benchMesh: reading each tip,
// encoding, signing and building every object in memory, on every
// processor. It leaves out writing the pack and moving the refs, file
// system work that a shared machine makes noisy, to measure the CPU and the
// allocations of the part that scales with the mesh.
func BenchmarkPlan1000Nodes(b *testing.B) {
	ctx := context.Background()
	signer, _ := testSigner(b)
	base := benchMesh("a")
	names := slices.Sorted(maps.Keys(base))
	refs := make([]string, len(names))
	for i, n := range names {
		refs[i] = Ref(n)
	}
	opts := WriteOptions{Source: strings.Repeat("a", 40), Signer: signer}.withDefaults()
	r, err := OpenLocal(bareRepo(b))
	if err != nil {
		b.Fatal(err)
	}
	// run plans every node against the branches' tips now and checks how
	// many would be written.
	run := func(b *testing.B, written int) {
		open, tips, err := r.b.snapshot(ctx, refs)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		defer benchcpu.Report(b)()
		for b.Loop() {
			plans, err := planAll(open, newObjects(), names, base, tips, opts)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for _, p := range plans {
				if p.up != nil {
					n++
				}
			}
			if n != written {
				b.Fatalf("%d nodes planned to be written, want %d", n, written)
			}
		}
	}
	b.Run("first", func(b *testing.B) { run(b, len(names)) })
	if _, err := r.Write(ctx, base, opts); err != nil {
		b.Fatal(err)
	}
	b.Run("no-change", func(b *testing.B) { run(b, 0) })
}

// packBytes is the size of the packs in repo.
func packBytes(b *testing.B, repo string) int64 {
	packs, err := filepath.Glob(filepath.Join(repo, "objects", "pack", "*.pack"))
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, p := range packs {
		st, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		size += st.Size()
	}
	return size
}
