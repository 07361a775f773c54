package service

import (
	"context"
	"errors"
	"testing"

	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The changelog check before each connection of the changelog store meets
// a broker coming back (Apache Kafka 4.4.0 answered BROKER_NOT_AVAILABLE
// to DescribeConfigs after a 12 s SIGSTOP, and the check failed all three
// partitions): that answer is retried, the next check passes; an error
// that is no broker's transient state stays permanent.
func TestChangelogCheckRetriesABrokerComingBack(t *testing.T) {
	for _, tc := range []struct {
		err       *kerr.Error
		want      error
		retriable bool
	}{
		{kerr.BrokerNotAvailable, kafka.BrokerNotAvailable, true},
		{kerr.LeaderNotAvailable, kafka.LeaderNotAvailable, true}, // kafka-go's own list
		{kerr.UnknownServerError, kafka.Unknown, false},
		{kerr.TopicAuthorizationFailed, kafka.TopicAuthorizationFailed, false},
	} {
		t.Run(tc.err.Message, func(t *testing.T) {
			c, cfg := controlledCluster(t, "g-check-"+tc.err.Message, nil)
			s, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeConfigs}, Err: tc.err, Count: 1, Resource: cfg.Topics.Changelog})
			err = s.checkChangelog(context.Background())
			if !errors.Is(err, tc.want) || pipeline.IsRetriable(err) != tc.retriable {
				t.Fatalf("error %v (retriable %t), want %v, retriable %t", err, pipeline.IsRetriable(err), tc.want, tc.retriable)
			}
			if n := h.Hits(); n != 1 {
				t.Fatalf("the fault answered %d requests, want 1", n)
			}
			if err := s.checkChangelog(context.Background()); err != nil {
				t.Fatalf("the check after the fault: %v", err)
			}
		})
	}
}
