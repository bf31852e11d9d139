package core

import (
	"testing"
	"unsafe"
)

// Issue #38: at most 1 KiB of client memory per held lock. A Lock (with the watchdog's entry for
// it) is most of it: it must stay within the 576-byte size class (the next one is 640).
func TestLock_sizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Lock{}); n > 576 {
		t.Fatalf("a Lock is %d bytes: over the 576-byte size class (see Lock's layout)", n)
	}
}
