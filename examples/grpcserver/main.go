// Command grpcserver serves a small gRPC account service whose withdrawals are serialised per
// account with grpcmw's interceptor and made idempotent with the idempotency-key metadata.
//
// The balances live in Redis and a withdrawal is a plain GET then SET: only the per-account lock
// keeps concurrent withdrawals, on any number of replicas, from losing updates.
//
//	go run ./examples/grpcserver                      # server on 127.0.0.1:50051, embedded Redis
//	go run ./examples/grpcserver -client              # in another terminal: runs the demo calls
//
// With -redis empty the server starts an embedded Redis (miniredis, with TTLs that count down);
// name a real one to run several replicas on different -addr values.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/lockkittest"
	"github.com/lockkit/lockkit/middleware/grpcmw"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"
)

const startBalance = 100

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "address to serve on (or, with -client, to call)")
	redisAddr := flag.String("redis", os.Getenv("REDIS_ADDR"), "address of a real Redis (embedded when empty)")
	client := flag.Bool("client", false, "call a running server instead of serving")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	run := serve
	if *client {
		run = demo
	}
	if err := run(ctx, *addr, *redisAddr); err != nil {
		fmt.Fprintln(os.Stderr, "grpcserver:", err)
		os.Exit(1)
	}
}

// serve runs the server until ctx ends.
func serve(ctx context.Context, addr, redisAddr string) error {
	if redisAddr == "" {
		embedded, err := lockkittest.StartServer()
		if err != nil {
			return err
		}
		defer embedded.Close()
		redisAddr = embedded.Addr()
		fmt.Println("embedded Redis at", redisAddr)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, DisableIdentity: true})
	defer rdb.Close()
	locks, err := core.New(rdb)
	if err != nil {
		return err
	}
	defer locks.Close(context.WithoutCancel(ctx))

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcmw.UnaryServerInterceptor(locks,
		grpcmw.WithWait(2*time.Second), // a withdrawal waits for the one before it on its account
		grpcmw.WithIdempotency(24*time.Hour),
		grpcmw.WithStoredErrors(codes.FailedPrecondition), // "insufficient funds" is replayed too
	)))
	if err := registerDescriptor(); err != nil {
		return err
	}
	srv.RegisterService(&accountsDesc, &accounts{rdb: rdb})
	reflection.Register(srv) // lets grpcurl list and call the service
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println("serving lockkit.example.Accounts on", lis.Addr())
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	return srv.Serve(lis)
}

// accounts implements the service. Balances are Redis strings "example:balance:ACCOUNT".
type accounts struct{ rdb *redis.Client }

// withdrawRequest is {"account": string, "amount": number}; its lock key is the account.
type withdrawRequest struct{ *structpb.Struct }

// LockKey implements grpcmw.Keyer.
func (r withdrawRequest) LockKey() string {
	return "account/" + r.GetFields()["account"].GetStringValue()
}

// withdraw takes amount from the account: a read-modify-write that is safe only under the lock.
func (a *accounts) withdraw(ctx context.Context, req withdrawRequest) (*structpb.Struct, error) {
	account := req.GetFields()["account"].GetStringValue()
	amount := int64(req.GetFields()["amount"].GetNumberValue())
	if account == "" || amount <= 0 {
		return nil, status.Error(codes.InvalidArgument, "want {\"account\": string, \"amount\": positive number}")
	}
	balance, err := a.balance(ctx, account)
	if err != nil {
		return nil, err
	}
	if balance < amount {
		return nil, status.Errorf(codes.FailedPrecondition, "insufficient funds: balance %d, amount %d", balance, amount)
	}
	time.Sleep(5 * time.Millisecond) // the slow part of a real withdrawal: a window for lost updates
	// ctx is the lock's context: if the lock is lost, the write below is not made.
	if err := a.rdb.Set(ctx, "example:balance:"+account, balance-amount, 0).Err(); err != nil {
		return nil, status.Errorf(codes.Unavailable, "store: %v", err)
	}
	return structpb.NewStruct(map[string]any{"account": account, "balance": balance - amount})
}

func (a *accounts) balance(ctx context.Context, account string) (int64, error) {
	s, err := a.rdb.Get(ctx, "example:balance:"+account).Result()
	if err == redis.Nil {
		return startBalance, nil
	}
	if err != nil {
		return 0, status.Errorf(codes.Unavailable, "store: %v", err)
	}
	return strconv.ParseInt(s, 10, 64)
}

// accountsDesc registers the service by hand (there is no generated code): the messages are
// google.protobuf.Struct. registerDescriptor describes it for reflection.
var accountsDesc = grpc.ServiceDesc{
	ServiceName: "lockkit.example.Accounts",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Withdraw", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			req := withdrawRequest{&structpb.Struct{}}
			if err := dec(req); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				return srv.(*accounts).withdraw(ctx, req.(withdrawRequest))
			}
			if ic == nil {
				return h(ctx, req)
			}
			return ic(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: withdrawMethod}, h)
		}},
		{MethodName: "Balance", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			req := &structpb.Struct{} // no LockKey: reads take no lock
			if err := dec(req); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				account := req.(*structpb.Struct).GetFields()["account"].GetStringValue()
				b, err := srv.(*accounts).balance(ctx, account)
				if err != nil {
					return nil, err
				}
				return structpb.NewStruct(map[string]any{"account": account, "balance": b})
			}
			if ic == nil {
				return h(ctx, req)
			}
			return ic(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: balanceMethod}, h)
		}},
	},
	Metadata: "lockkit/example/accounts.proto",
}

const (
	withdrawMethod = "/lockkit.example.Accounts/Withdraw"
	balanceMethod  = "/lockkit.example.Accounts/Balance"
)

// registerDescriptor adds the service's file descriptor to the global registry, where the
// reflection service finds it; once per process, so that serve can run again (as tests do).
func registerDescriptor() error {
	if _, err := protoregistry.GlobalFiles.FindFileByPath(accountsDesc.Metadata.(string)); err == nil {
		return nil
	}
	method := func(name string) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{Name: proto.String(name),
			InputType: proto.String(".google.protobuf.Struct"), OutputType: proto.String(".google.protobuf.Struct")}
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:       proto.String(accountsDesc.Metadata.(string)),
		Package:    proto.String("lockkit.example"),
		Dependency: []string{"google/protobuf/struct.proto"},
		Syntax:     proto.String("proto3"),
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: proto.String("Accounts"),
			Method: []*descriptorpb.MethodDescriptorProto{method("Withdraw"), method("Balance")}}},
	}, protoregistry.GlobalFiles)
	if err != nil {
		return err
	}
	return protoregistry.GlobalFiles.RegisterFile(fd)
}
