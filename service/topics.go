package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/driftstream/driftstream/pipeline"
	"github.com/segmentio/kafka-go"
)

// ensureTopics creates missing topics through the controller (the changelog
// compacted), checks that an existing changelog is compacted, and that the
// labels topic and the changelog are co-partitioned with the events topic.
func (s *Service) ensureTopics(ctx context.Context) error {
	conn, err := s.dialAny(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctrl, err := conn.Controller()
	if err != nil {
		return fmt.Errorf("find the controller: %w", err)
	}
	addr := net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port))
	cconn, err := s.cfg.Dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connect to the controller %s: %w", addr, err)
	}
	defer cconn.Close()
	t := s.cfg.Topics
	for _, name := range []string{t.Events, t.Labels, t.Predictions, t.Queries, t.DeadLetters, t.Alerts, t.Changelog} {
		if name == "" {
			continue
		}
		tc := kafka.TopicConfig{Topic: name, NumPartitions: s.cfg.Partitions, ReplicationFactor: s.cfg.Replication}
		if name == t.Changelog {
			tc.ConfigEntries = []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}
		} else {
			for _, k := range slices.Sorted(maps.Keys(s.cfg.StreamTopicConfig)) {
				tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: s.cfg.StreamTopicConfig[k]})
			}
		}
		if err := cconn.CreateTopics(tc); err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
	}
	// A broker creates topics asynchronously: wait until every one has a
	// leader for each partition before it is inspected or written (the
	// in-process broker creates them at once; Apache Kafka takes a moment).
	for _, name := range []string{t.Events, t.Labels, t.Predictions, t.Queries, t.DeadLetters, t.Alerts, t.Changelog} {
		if name == "" {
			continue
		}
		if err := awaitTopic(ctx, conn, name); err != nil {
			return err
		}
	}
	if t.Changelog != "" && s.cfg.Store == nil {
		if err := s.checkChangelog(ctx); err != nil {
			return err
		}
	}
	count := func(topic string) (int, error) {
		ps, err := conn.ReadPartitions(topic)
		return len(ps), err
	}
	ne, err := count(t.Events)
	if err != nil {
		return fmt.Errorf("topic %s: %w", t.Events, err)
	}
	s.eventPartitions = ne
	for _, other := range []string{t.Labels, t.Changelog} {
		if other == "" {
			continue
		}
		n, err := count(other)
		if err != nil {
			return fmt.Errorf("topic %s: %w", other, err)
		}
		if n != ne {
			return fmt.Errorf("topic %s has %d partitions but %s has %d: they must be co-partitioned (same partition count, same keys) so that a key's labels and state live with its events", other, n, t.Events, ne)
		}
	}
	return nil
}

// topicWait bounds how long awaitTopic waits for a topic's leaders.
const topicWait = 30 * time.Second

// awaitTopic waits until topic's metadata lists it with a leader for every
// partition.
func awaitTopic(ctx context.Context, conn *kafka.Conn, topic string) error {
	deadline := time.Now().Add(topicWait)
	for {
		ps, err := conn.ReadPartitions(topic)
		ready := err == nil && len(ps) > 0
		for _, p := range ps {
			if p.Leader.Host == "" {
				ready = false
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s has no leader for every partition %s after it was created (last: %v)", topic, topicWait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dialAny connects to the first reachable bootstrap broker.
func (s *Service) dialAny(ctx context.Context) (*kafka.Conn, error) {
	var errs []error
	for _, b := range s.cfg.Brokers {
		conn, err := s.cfg.Dialer.DialContext(ctx, "tcp", b)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("connect to %s: %w", b, err))
	}
	return nil, errors.Join(errs...)
}

// ErrChangelogGone reports a changelog topic that is missing, or no longer
// compacted, after the service checked it: deleted (and perhaps recreated
// by a broker's auto-creation). The service never writes to it then.
var ErrChangelogGone = errors.New("the changelog topic is gone or changed")

// checkChangelog refuses a changelog that is missing or whose cleanup policy
// deletes records: retention would drop the state of keys that have been
// quiet for a while, and a restore would silently start them from scratch.
// It runs at start and before every connection the changelog store makes
// (checkpoint.KafkaStore.Verify); its errors are permanent.
func (s *Service) checkChangelog(ctx context.Context) error {
	topic := s.cfg.Topics.Changelog
	client := &kafka.Client{Addr: kafka.TCP(s.cfg.Brokers...), Timeout: s.cfg.Dialer.Timeout}
	if s.cfg.Transport != nil {
		client.Transport = s.cfg.Transport
	}
	resp, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"cleanup.policy"}}}})
	if err != nil {
		return fmt.Errorf("describe changelog topic %s: %w", topic, err) // the broker: retried
	}
	policy := "delete" // the broker default when the topic does not set it
	for _, r := range resp.Resources {
		if errors.Is(r.Error, kafka.UnknownTopicOrPartition) {
			return fmt.Errorf("changelog topic %s does not exist (deleted?); the service never recreates it, since a new one would hold none of the keys' state: %w (docs/OPERATIONS.md, \"Rebuilding state\")",
				topic, ErrChangelogGone)
		}
		if r.Error != nil {
			return fmt.Errorf("describe changelog topic %s: %w", topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "cleanup.policy" {
				policy = e.ConfigValue
			}
		}
	}
	if policy != "compact" {
		return fmt.Errorf("changelog topic %s has cleanup.policy=%s: it must be exactly compact, or retention deletes the state of quiet keys (a changelog the broker auto-created after a deletion also has the broker's default policy, and none of the state: see docs/OPERATIONS.md, \"Rebuilding state\"); fix the policy with\n  kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact: %w",
			topic, strings.TrimSpace(policy), s.cfg.Brokers[0], topic, ErrChangelogGone)
	}
	return nil
}

// sizeOutputs reads the record limit of every output topic and of the
// changelog (the topic's max.message.bytes, else the broker's
// message.max.bytes) and sizes the pipeline's outputs below them: it
// refuses a configuration whose own records could exceed one
// (pipeline.Config.Validate for the outputs; the key records' bound here).
func (s *Service) sizeOutputs(ctx context.Context) error {
	t := s.cfg.Topics
	names := []string{}
	for _, n := range []string{t.Predictions, t.Queries, t.DeadLetters, t.Alerts, t.Changelog} {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	limits, err := s.messageLimits(ctx, names)
	if err != nil {
		return err
	}
	s.cfg.Pipeline.Outputs = pipeline.OutputLimits{Predictions: limits[t.Predictions], Queries: limits[t.Queries],
		DeadLetters: limits[t.DeadLetters], Alerts: limits[t.Alerts]}
	if err := s.cfg.Pipeline.Validate(); err != nil {
		return err
	}
	s.changelogLimit = limits[t.Changelog]
	if t.Changelog == "" || s.cfg.Store != nil || s.cfg.Pipeline.MaxKeyBytes <= 0 {
		return nil
	}
	need := pipeline.BatchOverhead + pipeline.RecordBytes(s.cfg.Pipeline.MaxKeyLength, int(s.cfg.Pipeline.MaxKeyBytes), nil)
	if need > s.changelogLimit {
		return fmt.Errorf("a key record of up to DRIFTSTREAM_MAX_KEY_BYTES = %d bytes with a key of up to DRIFTSTREAM_MAX_KEY_LENGTH = %d bytes takes %d bytes, over changelog topic %s's limit of %d (max.message.bytes): lower DRIFTSTREAM_MAX_KEY_BYTES or raise the topic's limit: %w",
			s.cfg.Pipeline.MaxKeyBytes, s.cfg.Pipeline.MaxKeyLength, need, t.Changelog, s.changelogLimit, pipeline.ErrTooLarge)
	}
	return nil
}

// messageLimits returns each topic's max.message.bytes where the topic sets
// it, else the controller's message.max.bytes: a topic without its own
// setting reports a default that a broker's setting overrides (the
// in-process broker reports the built-in default there).
// configSourceTopic is DescribeConfigs' DYNAMIC_TOPIC_CONFIG: a value set on
// the topic itself.
const configSourceTopic = 1

func (s *Service) messageLimits(ctx context.Context, topics []string) (map[string]int, error) {
	client := &kafka.Client{Addr: kafka.TCP(s.cfg.Brokers...), Timeout: s.cfg.Dialer.Timeout}
	if s.cfg.Transport != nil {
		client.Transport = s.cfg.Transport
	}
	req := &kafka.DescribeConfigsRequest{}
	for _, name := range topics {
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{ResourceType: kafka.ResourceTypeTopic, ResourceName: name,
			ConfigNames: []string{"max.message.bytes"}})
	}
	resp, err := client.DescribeConfigs(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("describe the output topics' max.message.bytes: %w", err)
	}
	limits := map[string]int{}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return nil, fmt.Errorf("describe topic %s: %w", r.ResourceName, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "max.message.bytes" && e.ConfigSource == configSourceTopic {
				n, err := strconv.Atoi(strings.TrimSpace(e.ConfigValue))
				if err != nil || n <= 0 {
					return nil, fmt.Errorf("topic %s: max.message.bytes = %q is not a positive number", r.ResourceName, e.ConfigValue)
				}
				limits[r.ResourceName] = n
			}
		}
	}
	if len(limits) == len(topics) {
		return limits, nil
	}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return nil, fmt.Errorf("find the controller for message.max.bytes: %w", err)
	}
	bresp, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeBroker, ResourceName: strconv.Itoa(meta.Controller.ID), ConfigNames: []string{"message.max.bytes"}}}})
	if err != nil {
		return nil, fmt.Errorf("describe broker %d's message.max.bytes: %w", meta.Controller.ID, err)
	}
	broker := pipeline.DefaultMaxMessageBytes
	for _, r := range bresp.Resources {
		for _, e := range r.ConfigEntries {
			if n, err := strconv.Atoi(strings.TrimSpace(e.ConfigValue)); e.ConfigName == "message.max.bytes" && err == nil && n > 0 {
				broker = n
			}
		}
	}
	for _, name := range topics {
		if _, ok := limits[name]; !ok {
			limits[name] = broker
		}
	}
	return limits, nil
}
