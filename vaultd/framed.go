package vaultd

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/meshgen/meshgen/vaultd/client"
)

// framedBatch is a seal batch's answer for a caller that accepts
// [client.SealBatchFramed].
type framedBatch client.SealBatchResponse

// write writes the answer as [client.SealBatchFramed], encoded in a
// buffer from answers (it holds no value: names, recipients and
// ciphertexts) that goes back there.
func (f framedBatch) write(w http.ResponseWriter, answers *bufPool) error {
	r := client.SealBatchResponse(f)
	// Room for the whole answer, so it is not copied as it grows.
	size := 16
	for _, it := range r.Items {
		size += 64
		if it.Sealed != nil {
			for _, s := range it.Sealed.Sealed {
				size += 32 + len(s.Recipient) + len(s.Ciphertext) + len(s.SHA256)
			}
		}
	}
	b, err := client.AppendSealBatchFramed(answers.get(size), &r)
	defer func() { answers.put(b) }()
	if err != nil {
		// Nothing is written yet: the caller is told, as of any failure.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		json.NewEncoder(w).Encode(client.ErrorBody{Code: client.CodeInternal, Error: "vaultd could not encode its answer: " + err.Error()})
		return err
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, err = w.Write(b)
	return err
}

// accepts reports whether r's Accept header names the media type mediaType.
func accepts(r *http.Request, mediaType string) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			t, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || t != mediaType {
				continue
			}
			// "q=0" says the caller does not accept it.
			if q, err := strconv.ParseFloat(params["q"], 64); err == nil && q == 0 {
				continue
			}
			return true
		}
	}
	return false
}
