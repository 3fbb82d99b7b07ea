package declaration

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// Reports stay readable both ways: a report written before removedFiles and
// leftFiles existed reads with them empty, and writes back to the same bytes,
// so a report with nothing removed is exactly what an older reader knows.
// One with them round-trips.
func TestReportCompatibility(t *testing.T) {
	old, err := os.ReadFile("testdata/report-before-removed-files.json")
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(old, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.RemovedFiles != nil || rep.LeftFiles != nil || len(rep.Removed) != 1 {
		t.Fatalf("read %+v", rep)
	}
	again, err := json.MarshalIndent(&rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(again)+"\n" != string(old) {
		t.Fatalf("a report without removed files writes as\n%s", again)
	}

	rep.RemovedFiles = []string{"/srv/mesh/db/password.next"}
	rep.LeftFiles = []LeftFile{{Path: "/srv/mesh/db/second", Reason: "left alone: it is a symbolic link now"}}
	data, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rep) {
		t.Fatalf("round trip:\n%+v\n%+v", back, rep)
	}
}
