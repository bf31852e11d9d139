package pipe

import (
	"context"
	"testing"
)

// Every successful script call asks whether its command was abandoned: the answer for no error
// must cost nothing (errors.As's target escapes to the heap).
func TestAbandoned_noError_allocatesNothing(t *testing.T) {
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		if Abandoned(nil) {
			t.Fatal("nil abandoned")
		}
		Settle(ctx, nil)
	}); n != 0 {
		t.Fatalf("Abandoned(nil) and Settle(nil) allocate %v times, want 0", n)
	}
}
