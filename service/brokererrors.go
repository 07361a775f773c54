package service

import (
	"errors"

	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// transientBroker marks as retriable (pipeline.Retriable) the errors a
// broker that is restarting or electing a leader answers with which
// kafka-go does not call temporary itself:
//   - protocol.ErrNoLeader: kafka-go's metadata cache names no leader for
//     a partition (leader -1 while a broker restarts), a client-side error
//     with no Temporary method; the cache refreshes within its metadata TTL.
//   - kafka.BrokerNotAvailable: what a broker answers a DescribeConfigs
//     with while it is coming back (Apache Kafka 4.4.0, after a 12 s
//     SIGSTOP), outside kafka-go's list of retriable codes.
//
// Every other error is returned as it is: kafka-go's retriable codes say
// so for themselves (pipeline.IsRetriable asks them), and the rest are
// permanent.
func transientBroker(err error) error {
	if errors.Is(err, protocol.ErrNoLeader) || errors.Is(err, kafka.BrokerNotAvailable) {
		return pipeline.Retriable(err)
	}
	return err
}
