package grpcmw

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/exactlyonce"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// decode is exactlyonce.Decode followed by decodeRecord.
func decode(b []byte) ([32]byte, proto.Message, *status.Status, error) {
	rec, err := exactlyonce.Decode(string(b))
	if err != nil {
		return [32]byte{}, nil, nil, err
	}
	resp, st, err := decodeRecord(&rec)
	return rec.Fingerprint, resp, st, err
}

func TestRecord_roundTrip(t *testing.T) {
	o := newOptions("UnaryServerInterceptor", []Option{WithStoredErrors(codes.NotFound)})
	fp := sha256.Sum256([]byte("req"))
	st, _ := structpb.NewStruct(map[string]any{"a": 1.0, "b": "x"})
	for _, resp := range []proto.Message{wrapperspb.String("ok"), st, &wrapperspb.Int64Value{}} {
		rec, why := o.record(fp, resp, nil)
		if rec == nil {
			t.Fatalf("%T not recorded: %s", resp, why)
		}
		gotFP, got, gotSt, err := decode(rec)
		if err != nil || gotFP != fp || gotSt != nil || !proto.Equal(got, resp) {
			t.Fatalf("decode %T: %v %v %v %v", resp, gotFP == fp, got, gotSt, err)
		}
	}
	rec, _ := o.record(fp, nil, status.Error(codes.NotFound, "gone"))
	if rec == nil {
		t.Fatal("stored code not recorded")
	}
	if _, _, gotSt, err := decode(rec); err != nil || gotSt.Code() != codes.NotFound || gotSt.Message() != "gone" {
		t.Fatalf("status record: %v %v", gotSt, err)
	}
	for _, err := range []error{status.Error(codes.Internal, "x"), errors.New("plain")} {
		if rec, _ := o.record(fp, nil, err); rec != nil {
			t.Fatalf("error %v recorded", err)
		}
	}
	if rec, why := o.record(fp, struct{}{}, nil); rec != nil || why == "" {
		t.Fatal("non-proto response recorded")
	}
	// Over the size cap: not stored, with a reason to log.
	small := newOptions("UnaryServerInterceptor", []Option{WithMaxBody(8)})
	if rec, why := small.record(fp, wrapperspb.String(strings.Repeat("x", 100)), nil); rec != nil || !strings.Contains(why, "limit") {
		t.Fatalf("response over the cap: %d bytes, %q", len(rec), why)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	o := newOptions("UnaryServerInterceptor", []Option{WithStoredErrors(codes.NotFound)})
	fp := sha256.Sum256(nil)
	must := func(b []byte, _ string) []byte { return b }
	for _, rec := range [][]byte{
		must(o.record(fp, wrapperspb.String("hello"), nil)),
		must(o.record(fp, &wrapperspb.BoolValue{Value: true}, nil)),
		must(o.record(fp, nil, status.Error(codes.NotFound, "no"))),
		exactlyonce.Encode(kindResponse, fp, nil),
		exactlyonce.Encode(kindStatus, fp, []byte("\x08\x00")),
		[]byte("lkg1" + strings.Repeat("x", sha256.Size) + "r"),
		nil,
	} {
		f.Add(rec)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		gotFP, resp, st, err := decode(b)
		if err != nil {
			return
		}
		if (resp == nil) == (st == nil) {
			t.Fatalf("decoded both or neither: %v %v", resp, st)
		}
		if st != nil {
			if st.Code() == codes.OK {
				t.Fatal("replayed an OK status")
			}
			return
		}
		// A decoded response encodes to a record that decodes to an equal response.
		rec, why := o.record(gotFP, resp, nil)
		if rec == nil {
			t.Fatalf("cannot re-encode %T: %s", resp, why)
		}
		fp2, resp2, _, err := decode(rec)
		if err != nil || fp2 != gotFP || !proto.Equal(resp, resp2) {
			t.Fatalf("round trip: %v %v %v", resp, resp2, err)
		}
	})
}
