package grpcmw

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestRecord_roundTrip(t *testing.T) {
	o := newOptions([]Option{WithStoredErrors(codes.NotFound)})
	fp := sha256.Sum256([]byte("req"))
	st, _ := structpb.NewStruct(map[string]any{"a": 1.0, "b": "x"})
	for _, resp := range []proto.Message{wrapperspb.String("ok"), st, &wrapperspb.Int64Value{}} {
		rec, ok := o.record(fp, resp, nil)
		if !ok {
			t.Fatalf("%T not recorded", resp)
		}
		gotFP, got, gotSt, err := decodeRecord(rec)
		if err != nil || gotFP != fp || gotSt != nil || !proto.Equal(got, resp) {
			t.Fatalf("decode %T: %v %v %v %v", resp, gotFP == fp, got, gotSt, err)
		}
	}
	rec, ok := o.record(fp, nil, status.Error(codes.NotFound, "gone"))
	if !ok {
		t.Fatal("stored code not recorded")
	}
	if _, _, gotSt, err := decodeRecord(rec); err != nil || gotSt.Code() != codes.NotFound || gotSt.Message() != "gone" {
		t.Fatalf("status record: %v %v", gotSt, err)
	}
	for _, err := range []error{status.Error(codes.Internal, "x"), errors.New("plain")} {
		if _, ok := o.record(fp, nil, err); ok {
			t.Fatalf("error %v recorded", err)
		}
	}
	if _, ok := o.record(fp, struct{}{}, nil); ok {
		t.Fatal("non-proto response recorded")
	}
}

func FuzzDecodeRecord(f *testing.F) {
	o := newOptions([]Option{WithStoredErrors(codes.Aborted)})
	fp := sha256.Sum256(nil)
	for _, rec := range [][]byte{
		mustRecord(o.record(fp, wrapperspb.String("hello"), nil)),
		mustRecord(o.record(fp, &wrapperspb.BoolValue{Value: true}, nil)),
		mustRecord(o.record(fp, nil, status.Error(codes.Aborted, "no"))),
		[]byte(recordMagic + strings.Repeat("x", sha256.Size) + "r"),
		[]byte(recordMagic + strings.Repeat("x", sha256.Size) + "s\x08\x00"),
		[]byte("lkg1"),
		nil,
	} {
		f.Add(rec)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		gotFP, resp, st, err := decodeRecord(b)
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
		rec, ok := o.record(gotFP, resp, nil)
		if !ok {
			t.Fatalf("cannot re-encode %T", resp)
		}
		fp2, resp2, _, err := decodeRecord(rec)
		if err != nil || fp2 != gotFP || !proto.Equal(resp, resp2) {
			t.Fatalf("round trip: %v %v %v", resp, resp2, err)
		}
	})
}

func mustRecord(b []byte, ok bool) []byte {
	if !ok {
		panic("not recorded")
	}
	return b
}
