package reconciler

import (
	"testing"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// TestExampleLab resolves and renders the example mesh, examples/lab. It is
// not compared byte for byte (the example is another role's, and grows):
// it must resolve, render what hostd accepts, and, without the certificate
// authority's answer, show the proxy waiting and deliver nothing of it.
func TestExampleLab(t *testing.T) {
	repo, err := schema.LoadDir("../examples/lab")
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := Resolve(repo, ResolveOptions{})
	if err != nil {
		t.Fatalf("examples/lab does not resolve: %v", err)
	}
	var answers Answers
	for _, w := range waiting.Waiting {
		provider := assignment(waiting, w.Provider)
		if answers == nil {
			answers = Answers{}
		}
		if answers[provider.Node] == nil {
			answers[provider.Node] = map[string]map[string]string{}
		}
		fields := map[string]string{}
		for _, f := range w.Fields {
			fields[f] = "answered-" + f
		}
		answers[provider.Node][w.Answer] = fields
		if a := assignment(waiting, w.Assignment); len(a.Skipped) == 0 {
			t.Errorf("%s waits for %s but nothing of it is held back", w.Assignment, w.Provider)
		}
	}
	if _, err := snapshot(repo, ResolveOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := Resolve(repo, ResolveOptions{Answers: answers})
	if err != nil {
		t.Fatalf("examples/lab does not resolve with every answer: %v", err)
	}
	if len(res.Waiting) != 0 {
		t.Fatalf("still waiting with every answer given: %+v", res.Waiting)
	}
	for _, a := range res.Assignments {
		if len(a.Skipped) != 0 {
			t.Errorf("%s still skips %v", a.ID, a.Skipped)
		}
	}
	if _, err := snapshot(repo, ResolveOptions{Answers: answers}); err != nil {
		t.Fatal(err)
	}
	if len(res.Secrets) == 0 {
		t.Error("the example needs no secret")
	}
}
