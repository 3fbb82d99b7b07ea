package cli

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

type hinted struct{ msg, hint string }

func (h hinted) Error() string { return h.msg }
func (h hinted) Hint() string  { return h.hint }

func TestReport(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantCode int
		wantOut  string
	}{
		{"plain", errors.New("no such mesh"), 1, "meshgen: no such mesh\n"},
		{"exit code only", ExitError{Code: 2}, 2, ""},
		{"wrapped exit code", fmt.Errorf("plan: %w", ExitError{Code: 2}), 2, ""},
		{"hint", fmt.Errorf("check: %w", hinted{"3 problems", "fix them"}), 1, "meshgen: check: 3 problems\nmeshgen: hint: fix them\n"},
		{"empty hint", hinted{"refused", ""}, 1, "meshgen: refused\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := Report(&out, "meshgen", tt.err); code != tt.wantCode {
				t.Errorf("code = %d, want %d", code, tt.wantCode)
			}
			if out.String() != tt.wantOut {
				t.Errorf("output = %q, want %q", out.String(), tt.wantOut)
			}
		})
	}
}
