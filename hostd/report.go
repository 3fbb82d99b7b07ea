package hostd

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// FormatText renders a report for people: a headline, then one line per
// resource in declared order with its outcome and reason.
func FormatText(rep declaration.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s of mesh %s: generation %d applied (attempted %d, source %s) at %s\n",
		rep.Node, rep.Mesh, rep.Generation, rep.Attempted, short(rep.Source), rep.Time.Format("2006-01-02 15:04:05Z07:00"))
	if rep.Refused != "" {
		fmt.Fprintf(&b, "REFUSED: %s\n", rep.Refused)
	}
	for _, r := range rep.Resources {
		fmt.Fprintf(&b, "  %-10s %-9s %s", r.Outcome, r.Kind, r.ID)
		if r.Reason != "" {
			fmt.Fprintf(&b, ": %s", r.Reason)
		}
		b.WriteByte('\n')
	}
	for _, name := range rep.Removed {
		fmt.Fprintf(&b, "  %-10s %-9s %s: no longer declared\n", "removed", declaration.KindContainer, name)
	}
	for _, p := range rep.RemovedFiles {
		fmt.Fprintf(&b, "  %-10s %-9s %s: secret no longer declared\n", "removed", declaration.KindFile, p)
	}
	for _, l := range rep.LeftFiles {
		fmt.Fprintf(&b, "  %-10s %-9s %s: secret %s\n", "left", declaration.KindFile, l.Path, l.Reason)
	}
	ids := make([]string, 0, len(rep.Answers))
	for id := range rep.Answers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "  answer of %s: %d fields\n", id, len(rep.Answers[id]))
	}
	if rep.OK() {
		b.WriteString("ok\n")
	} else {
		b.WriteString("NOT OK\n")
	}
	return b.String()
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// outcomes lists every outcome, in the order the textfile writes them.
var outcomes = []declaration.Outcome{
	declaration.Created, declaration.Corrected, declaration.Unchanged, declaration.Kept,
	declaration.Ran, declaration.Recreated, declaration.Failed, declaration.Gated,
}

// Textfile renders a report in the Prometheus text format, for
// node_exporter's textfile collector.
func Textfile(rep declaration.Report) string {
	counts := map[declaration.Outcome]int{}
	for _, r := range rep.Resources {
		counts[r.Outcome]++
	}
	var b strings.Builder
	lbl := fmt.Sprintf(`mesh=%q,node=%q`, rep.Mesh, rep.Node)
	b.WriteString("# HELP hostd_resources Resources by outcome in the last apply.\n# TYPE hostd_resources gauge\n")
	for _, o := range outcomes {
		fmt.Fprintf(&b, "hostd_resources{%s,outcome=%q} %d\n", lbl, o, counts[o])
	}
	ok, refused := 0, 0
	if rep.OK() {
		ok = 1
	}
	if rep.Refused != "" {
		refused = 1
	}
	b.WriteString("# HELP hostd_removed Things the last apply removed because the declaration no longer names them.\n# TYPE hostd_removed gauge\n")
	fmt.Fprintf(&b, "hostd_removed{%s,kind=%q} %d\n", lbl, declaration.KindContainer, len(rep.Removed))
	fmt.Fprintf(&b, "hostd_removed{%s,kind=%q} %d\n", lbl, declaration.KindFile, len(rep.RemovedFiles))
	fmt.Fprintf(&b, "# HELP hostd_secret_files_left Secret files no longer declared that the last apply left on disk.\n# TYPE hostd_secret_files_left gauge\nhostd_secret_files_left{%s} %d\n", lbl, len(rep.LeftFiles))
	fmt.Fprintf(&b, "# HELP hostd_apply_ok 1 when the last apply succeeded.\n# TYPE hostd_apply_ok gauge\nhostd_apply_ok{%s} %d\n", lbl, ok)
	fmt.Fprintf(&b, "# HELP hostd_refused 1 when the newest declaration was refused.\n# TYPE hostd_refused gauge\nhostd_refused{%s} %d\n", lbl, refused)
	fmt.Fprintf(&b, "# HELP hostd_generation The generation applied.\n# TYPE hostd_generation gauge\nhostd_generation{%s} %d\n", lbl, rep.Generation)
	fmt.Fprintf(&b, "# HELP hostd_last_apply_timestamp_seconds When the last apply finished.\n# TYPE hostd_last_apply_timestamp_seconds gauge\nhostd_last_apply_timestamp_seconds{%s} %d\n", lbl, rep.Time.Unix())
	return b.String()
}

// WriteTextfile writes [Textfile] atomically to path.
func WriteTextfile(path string, rep declaration.Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write textfile: %w", err)
	}
	if err := writeAtomic(path, []byte(Textfile(rep)), 0o644, -1, -1); err != nil {
		return fmt.Errorf("write textfile: %w", err)
	}
	return nil
}
