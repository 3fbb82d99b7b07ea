package vaultd

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meshgen/meshgen/vaultd/client"
	"pgregory.net/rapid"
)

// slowDecode is encoding/json's reading of a seal batch, as decode does it.
func slowDecode(data []byte) (client.SealBatchRequest, error) {
	var req client.SealBatchRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	return req, err
}

func batchSeeds() []string {
	return []string{
		`{"requests":[]}`,
		`{"requests":[{"name":"db/password","spec":{"length":32,"alphabet":"alnum","rotation":"one-party"},"appliers":["age1a"],"recipients":["age1b","age1a"]}]}`,
		` { "requests" : [ { "name" : "x" , "spec" : { } , "recipients" : [ ] } , {"name":"y","recipients":null} ] } ` + "\n\t",
		`{"requests":[{"name":"x","spec":{"maxAge":"720h0m0s","operator":true,"format":"bcrypt","notRotatable":"why","length":-0}}]}`,
		`{"requests":[{"name":"x","spec":{"maxAge":"soon"}}]}`,
		`{"requests":[{"name":"x","spec":{"maxAge":null}}]}`,
		`{"requests":[{"name":"x","spec":{"length":1.0}}]}`,
		`{"requests":[{"name":"x","spec":{"length":1e2}}]}`,
		`{"requests":[{"name":"x","spec":{"length":01}}]}`,
		`{"requests":[{"name":"x","spec":{"length":99999999999999999999}}]}`,
		`{"requests":[{"name":"x","spec":{"operator":tru}}]}`,
		`{"requests":[{"Name":"x"}]}`,
		`{"requests":[{"name":"x","name":"y"}]}`,
		`{"requests":[{"name":"x\u0041"}]}`,
		`{"requests":[{"name":"é"}]}`,
		`{"requests":[{"name":"x","bogus":1}]}`,
		`{"requests":[{"name":"x"}]} trailing`,
		`{"requests":[{"name":"x"}]}{"requests":[]}`,
		`{"requests":null}`,
		`{}`,
		``,
		`{"requests":[{"name":"x","recipients":["a",]}]}`,
		`{"requests":[{"name":"x",}]}`,
		`[]`,
	}
}

// FuzzParseSealBatch: whatever the fast parser takes, encoding/json takes
// too, and reads the same requests from it.
func FuzzParseSealBatch(f *testing.F) {
	for _, s := range batchSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reqs, ok := parseSealBatch(data)
		if !ok {
			return
		}
		want, err := slowDecode(data)
		if err != nil {
			t.Fatalf("parseSealBatch took %q, which encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(reqs, want.Requests) && !(len(reqs) == 0 && len(want.Requests) == 0) {
			t.Fatalf("parseSealBatch read %q as\n%#v\nencoding/json as\n%#v", data, reqs, want.Requests)
		}
	})
}

// TestParseSealBatchTakesClientBodies: the bodies client.SealBatch sends
// (json.Marshal of a batch of plain names and recipients) are read by the
// fast parser, as encoding/json reads them.
func TestParseSealBatchTakesClientBodies(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		word := rapid.StringMatching(`[A-Za-z0-9][A-Za-z0-9._@:/-]{0,40}`)
		recipients := rapid.SliceOfN(rapid.StringMatching(`age1[a-z0-9]{58}`), 0, 4)
		in := client.SealBatchRequest{Requests: rapid.SliceOfN(rapid.Custom(func(t *rapid.T) client.SealRequest {
			r := client.SealRequest{Name: word.Draw(t, "name"), Appliers: recipients.Draw(t, "appliers"), Recipients: recipients.Draw(t, "recipients")}
			if rapid.Bool().Draw(t, "spec") {
				r.Spec = client.Spec{
					Length: rapid.IntRange(0, 1024).Draw(t, "length"), Alphabet: rapid.SampledFrom([]string{"", client.AlphabetAlnum, client.AlphabetHex}).Draw(t, "alphabet"),
					Format: rapid.SampledFrom([]string{"", client.FormatBcrypt, client.FormatMosquittoPBKDF2}).Draw(t, "format"), NotRotatable: word.Draw(t, "notRotatable"),
					Rotation: rapid.SampledFrom([]string{"", client.OneParty, client.TwoParty}).Draw(t, "rotation"),
					MaxAge:   client.Duration(rapid.Int64Range(0, int64(1000*time.Hour)).Draw(t, "maxAge")), Operator: rapid.Bool().Draw(t, "operator"),
				}
			}
			if rapid.Bool().Draw(t, "nil recipients") {
				r.Recipients = nil
			}
			return r
		}), 0, 20).Draw(t, "requests")}
		body, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		reqs, ok := parseSealBatch(body)
		if !ok {
			t.Fatalf("a client's body goes to encoding/json: %s", body)
		}
		want, err := slowDecode(body)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(reqs, want.Requests) && !(len(reqs) == 0 && len(want.Requests) == 0) {
			t.Fatalf("parseSealBatch read %s as\n%#v\nencoding/json as\n%#v", body, reqs, want.Requests)
		}
	})
}

// TestDecodeSealBatchAnswersAsDecode: through the request, the batch route
// reads (or refuses, with the same message) every body as decode does:
// bodies the parser gives up included, and one over the size limit.
func TestDecodeSealBatchAnswersAsDecode(t *testing.T) {
	bodies := batchSeeds()
	bodies = append(bodies, `{"requests":[{"name":"x"}]}`+strings.Repeat(" ", maxBody), `{"requests":[{"name":"`+strings.Repeat("x", maxBody)+`"}]}`)
	for _, body := range bodies {
		request := func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/v1/seal-batch", strings.NewReader(body))
			r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, maxBody)
			return r
		}
		var fast, slow client.SealBatchRequest
		var bodies bufPool
		fastErr, slowErr := decodeSealBatch(request(), &fast, &bodies), decode(request(), &slow)
		if (fastErr == nil) != (slowErr == nil) || fastErr != nil && fastErr.Error() != slowErr.Error() {
			t.Errorf("body %.80q: decodeSealBatch says %v, decode %v", body, fastErr, slowErr)
		}
		if !reflect.DeepEqual(fast, slow) && !(len(fast.Requests) == 0 && len(slow.Requests) == 0) {
			t.Errorf("body %.80q: decodeSealBatch read %#v, decode %#v", body, fast, slow)
		}
	}
}

// TestReadBody: a body is read whole whatever room its buffer had.
func TestReadBody(t *testing.T) {
	for _, tt := range []struct {
		body string
		room int
	}{{"", 0}, {"abc", 3}, {"abc", 4}, {"abc", 1}, {"abc", 100}, {strings.Repeat("x", 5000), 512}} {
		got, err := readBody(io.LimitReader(strings.NewReader(tt.body), 1<<20), make([]byte, 0, tt.room))
		if err != nil || string(got) != tt.body {
			t.Errorf("readBody(%d bytes into room for %d) = %d bytes, %v", len(tt.body), tt.room, len(got), err)
		}
	}
}
