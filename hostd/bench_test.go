package hostd

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// A poll with nothing new: one ref listing, over file:// and git://.
// Target: under 50 ms on 2 cores.
func BenchmarkNoopPoll(b *testing.B) {
	for _, transport := range []string{"file", "git", "http"} {
		b.Run(transport, func(b *testing.B) {
			g := newGitRemote(b)
			url := g.url(transport)
			f := newFixture(b, fixtureOptions{Remote: url})
			// A fleet's worth of other branches the listing must not fetch.
			for i := 0; i < 20; i++ {
				g.publish(fmt.Sprintf("other%d", i), f.branch(f.decl(fileRes("m/a", f.path("a"), "x"))))
			}
			head := g.publish("n1", f.branch(f.decl(fileRes("m/a", f.path("a"), "x"))))
			ctx := context.Background()
			if _, err := f.host.Fetch(ctx, ""); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := f.host.Fetch(ctx, head); !errors.Is(err, ErrNothingNew) {
					b.Fatalf("poll: %v", err)
				}
			}
		})
	}
}

// A no-op apply of 200 resources, 20 of them running containers: one podman
// query, then per resource a compare. Target: under 200 ms on 2 cores.
func BenchmarkNoopApply(b *testing.B) {
	f := newFixture(b, fixtureOptions{})
	var rs []declaration.Resource
	for i := 0; i < 20; i++ {
		dir := f.path(fmt.Sprintf("mod%d", i))
		rs = append(rs, dirRes(fmt.Sprintf("mod%d/data", i), dir))
		for j := 0; j < 8; j++ {
			rs = append(rs, fileRes(fmt.Sprintf("mod%d/f%d", i, j), fmt.Sprintf("%s/f%d.conf", dir, j), fmt.Sprintf("key=%d.%d\n", i, j)))
		}
		rs = append(rs, ctrRes(fmt.Sprintf("mod%d/server", i), declaration.Container{
			Name: f.cname(fmt.Sprintf("mod%d", i)), Command: sleeper,
			Env:    map[string]string{"MODULE": fmt.Sprint(i)},
			Mounts: []declaration.Mount{{Source: dir, Target: "/data"}},
		}))
	}
	d := f.decl(rs...)
	if len(d.Resources) != 200 {
		b.Fatalf("%d resources", len(d.Resources))
	}
	f.mustApply(d)
	ctx := context.Background()
	for b.Loop() {
		rep, err := f.host.ApplyTarget(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rep.Resources {
			if r.Outcome != declaration.Unchanged {
				b.Fatalf("%s: %s (%s)", r.ID, r.Outcome, r.Reason)
			}
		}
	}
}

// The end of a rotation on a node holding 50 secret files: a generation that
// stages a next value of each (written, timer stopped), then one that no
// longer declares them: 50 files removed after a complete apply.
func BenchmarkRotationEndRemovesSecretFiles(b *testing.B) {
	f := newFixture(b, fixtureOptions{})
	var current, staged []declaration.Resource
	var secrets []sealed
	for i := 0; i < 50; i++ {
		cur, next := f.seal(fmt.Sprintf("s%d", i), 1, fmt.Sprintf("pw-%d", i)), f.seal(fmt.Sprintf("s%d-next", i), 2, fmt.Sprintf("pw-next-%d", i))
		secrets = append(secrets, cur, next)
		r := secretRes(fmt.Sprintf("m/s%d", i), f.path(fmt.Sprintf("s/%d", i)), cur)
		current = append(current, r)
		staged = append(staged, r, secretRes(fmt.Sprintf("m/s%d-next", i), f.path(fmt.Sprintf("s/%d.next", i)), next))
	}
	f.mustApply(f.decl(current...), secrets...)
	for b.Loop() {
		b.StopTimer()
		f.mustApply(f.decl(staged...), secrets...)
		b.StartTimer()
		if rep := f.mustApply(f.decl(current...), secrets...); len(rep.RemovedFiles) != 50 {
			b.Fatalf("removed %d files, want 50", len(rep.RemovedFiles))
		}
	}
}
