package service

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/driftstream/driftstream/internal/kafkatest"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ghostMember joins group with clientID as a consumer of topic that then
// goes silent without leaving, as a process killed by SIGKILL does: it
// stays a member until its session of sessionTimeout expires. It returns
// its member ID.
func ghostMember(t *testing.T, addr, group, clientID, topic string, sessionTimeout time.Duration) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(clientID))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close() // raw requests: closing the client sends no LeaveGroup
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{topic}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType = group, "consumer"
	join.SessionTimeoutMillis = int32(sessionTimeout.Milliseconds())
	join.RebalanceTimeoutMillis = join.SessionTimeoutMillis
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	join.Protocols = append(join.Protocols, p)
	ctx := context.Background()
	resp, err := join.RequestWith(ctx, cl)
	if err == nil && resp.ErrorCode == kerr.MemberIDRequired.Code { // KIP-394: join again with the ID given
		join.MemberID = resp.MemberID
		resp, err = join.RequestWith(ctx, cl)
	}
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ghost %s joins %s: %v %v", clientID, group, err, kerr.ErrorForCode(resp.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = group, resp.Generation, resp.MemberID
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	none := kmsg.NewConsumerMemberAssignment()
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = resp.MemberID, none.AppendTo(nil)
	sync.GroupAssignment = append(sync.GroupAssignment, a)
	if sresp, err := sync.RequestWith(ctx, cl); err != nil || sresp.ErrorCode != 0 {
		t.Fatalf("ghost %s syncs %s: %v %+v", clientID, group, err, sresp)
	}
	return resp.MemberID
}

// members are the client IDs of group's members, per the coordinator.
func members(t *testing.T, s *Service) []string {
	t.Helper()
	desc, err := s.adminClient().DescribeGroups(context.Background(), &kafka.DescribeGroupsRequest{GroupIDs: []string{s.cfg.Group}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range desc.Groups {
		for _, m := range g.Members {
			ids = append(ids, m.ClientID)
		}
	}
	return ids
}

// A process of an instance removes the membership a killed former process
// of the same instance left, and only that: a member of another instance
// stays.
func TestEvictFormerSelfRemovesOnlyItsOwn(t *testing.T) {
	for _, tc := range []struct {
		ghost   string
		removed int
		left    []string
	}{
		{"pod-0", 1, nil},
		{"pod-1", 0, []string{"pod-1"}},
		{"", 0, nil}, // the first start: no group yet
	} {
		t.Run("ghost "+tc.ghost, func(t *testing.T) {
			_, cfg := controlledCluster(t, "g-evict-"+tc.ghost+"x", func(c *Config) { c.InstanceID = "pod-0" })
			s, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if tc.ghost != "" {
				ghostMember(t, cfg.Brokers[0], cfg.Group, tc.ghost, cfg.Topics.Events, time.Minute)
			}
			for i, want := range []int{tc.removed, 0} { // a second attempt finds nothing of its own
				n, err := s.evictFormerSelf(context.Background())
				if err != nil || n != want {
					t.Fatalf("attempt %d: %d memberships removed (%v), want %d", i+1, n, err, want)
				}
			}
			if got := members(t, s); !slices.Equal(got, tc.left) {
				t.Fatalf("the group's members are %q, want %q", got, tc.left)
			}
		})
	}
}

// A process restarted after SIGKILL takes its partitions without waiting
// for its former process's session to expire: with a session timeout of
// a minute, every partition is assigned to it while the minute runs, the
// group holds it alone, and it logged one membership removed.
func TestRestartAfterKillTakesItsPartitionsAtOnce(t *testing.T) {
	_, cfg := controlledCluster(t, "g-evict-restart", func(c *Config) {
		c.InstanceID, c.SessionTimeout = "pod-0", time.Minute
	})
	var logs kafkatest.LogBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	ghostMember(t, cfg.Brokers[0], cfg.Group, "pod-0", cfg.Topics.Events, time.Minute)
	start := time.Now()
	s, stop := started(t, cfg)
	defer stop()
	eventually(t, 30*time.Second, func() bool { return s.Assigned() == partitions }, func() string {
		return "the partitions were not assigned within half the ghost's session:\n" + logs.String()
	})
	t.Logf("all %d partitions assigned %s after the start", partitions, time.Since(start).Round(time.Millisecond))
	if got := members(t, s); len(got) != 1 || got[0] != "pod-0" {
		t.Fatalf("the group's members are %q, want the new process alone", got)
	}
	if n := strings.Count(logs.String(), "removed the group membership of a former process"); n != 1 || !strings.Contains(logs.String(), "memberships=1") {
		t.Fatalf("%d removals logged, want one of one membership:\n%s", n, logs.String())
	}
}

// A coordinator that refuses to describe the group (an ACL that allows
// joining, not describing) costs the fast restart, not the start: the
// service logs once that the former membership could not be removed,
// then joins and runs its partitions.
func TestRefusedEvictionIsReportedAndJoinsAnyway(t *testing.T) {
	c, cfg := controlledCluster(t, "g-evict-refused", func(c *Config) { c.InstanceID = "pod-0" })
	var logs kafkatest.LogBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeGroups}, Err: kerr.GroupAuthorizationFailed, Count: -1})
	s, stop := started(t, cfg)
	defer stop()
	eventually(t, 30*time.Second, func() bool { return s.Assigned() == partitions }, func() string { return "not assigned:\n" + logs.String() })
	if n := strings.Count(logs.String(), "could not be removed"); n != 1 || h.Hits() != 1 || !strings.Contains(logs.String(), "Group Authorization Failed") {
		t.Fatalf("%d warnings after %d refused requests, want 1 after 1 naming the refusal:\n%s", n, h.Hits(), logs.String())
	}
}
