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

// DefaultPartitions is the partition count of the topics the service
// creates when the events topic does not exist either and
// Config.Partitions is 0.
const DefaultPartitions = 4

// ensureTopics checks the topics that exist against each other before it
// creates any (planTopics), then creates the missing ones with the events
// topic's partition count (the changelog compacted, planned for restores
// that stay proportional to live state: changelogConfig), and checks that
// an existing changelog is compacted.
func (s *Service) ensureTopics(ctx context.Context) error {
	t := s.cfg.Topics
	names := t.all()
	// The dialer first: its errors name a TLS or SASL mistake (explain).
	conn, err := s.dialAny(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctrl, err := conn.Controller()
	if err != nil {
		return fmt.Errorf("find the controller: %w", err)
	}
	existing, err := s.partitionCounts(ctx, names)
	if err != nil {
		return err
	}
	n, err := planTopics(t, s.cfg.Partitions, existing, s.cfg.Brokers[0])
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port))
	cconn, err := s.cfg.Dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connect to the controller %s: %w", addr, err)
	}
	defer cconn.Close()
	for _, name := range names {
		if _, ok := existing[name]; ok {
			continue
		}
		tc := kafka.TopicConfig{Topic: name, NumPartitions: n, ReplicationFactor: s.cfg.Replication}
		if name == t.Changelog {
			tc.ConfigEntries = changelogConfig()
		} else {
			for _, k := range slices.Sorted(maps.Keys(s.cfg.StreamTopicConfig)) {
				tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: s.cfg.StreamTopicConfig[k]})
			}
		}
		if err := cconn.CreateTopics(tc); err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
		s.log.Info("created topic", "topic", name, "partitions", n, "replication", s.cfg.Replication)
	}
	// A broker creates topics asynchronously: wait until every one has a
	// leader for each partition before it is inspected or written (the
	// in-process broker creates them at once; Apache Kafka takes a moment).
	for _, name := range names {
		if err := awaitTopic(ctx, conn, name); err != nil {
			return err
		}
	}
	if t.Changelog != "" && s.cfg.Store == nil {
		if err := s.checkChangelog(ctx); err != nil {
			return err
		}
		s.checkChangelogCompaction(ctx)
	}
	// Created concurrently by another member meanwhile? Check again.
	if existing, err = s.partitionCounts(ctx, names); err != nil {
		return err
	}
	if _, err := planTopics(t, 0, existing, s.cfg.Brokers[0]); err != nil {
		return err
	}
	s.eventPartitions = existing[t.Events]
	return nil
}

// all are the topics' names, each once, the events topic first.
func (t Topics) all() []string {
	var names []string
	for _, name := range []string{t.Events, t.Labels, t.Predictions, t.Queries, t.DeadLetters, t.Alerts, t.Changelog} {
		if name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// partitionCounts returns the partition count of each of topics that
// exists, asking the cluster in a way that never creates one (a metadata
// request without auto-creation, on a transport of its own: a shared
// transport's metadata cache may be older than the topics).
func (s *Service) partitionCounts(ctx context.Context, topics []string) (map[string]int, error) {
	tr := readerTransport(s.cfg.Transport)
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(s.cfg.Brokers...), Timeout: s.cfg.Dialer.Timeout, Transport: tr}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("read the metadata of topics %s: %w", strings.Join(topics, ", "), err)
	}
	counts := map[string]int{}
	for _, tp := range meta.Topics {
		switch {
		case tp.Error == nil:
			counts[tp.Name] = len(tp.Partitions)
		case !errors.Is(tp.Error, kafka.UnknownTopicOrPartition):
			return nil, fmt.Errorf("topic %s: %w", tp.Name, tp.Error)
		}
	}
	return counts, nil
}

// planTopics decides the partition count n of the topics the service
// creates, from the topics that exist (existing: name → partitions) and
// the configured count (0: none given), and refuses, before anything is
// created, a set of topics the service cannot run on, saying which setting
// or topic to change and how. The events topic's count is n when it
// exists; a configured count that differs is refused. The labels topic and
// the changelog must have exactly n partitions; the output topics at least
// n (each output goes to its input's partition number).
func planTopics(t Topics, configured int, existing map[string]int, broker string) (int, error) {
	n, ok := existing[t.Events]
	switch {
	case ok && configured > 0 && configured != n:
		return 0, fmt.Errorf("DRIFTSTREAM_PARTITIONS=%d, but the events topic %s already has %d partitions, and every topic of the service must have its count: unset DRIFTSTREAM_PARTITIONS (-partitions 0), and the service takes %d from the events topic: %w",
			configured, t.Events, n, n, ErrNotCoPartitioned)
	case !ok && configured > 0:
		n = configured
	case !ok:
		n = DefaultPartitions
	}
	var errs []error
	if c, ok := existing[t.Labels]; ok && t.Labels != "" && c != n {
		errs = append(errs, fmt.Errorf("the labels topic %s has %d partitions and the events topic %s %d: a key's labels must reach the partition number of its events; recreate the labels topic with %d partitions (or the events topic with %d)",
			t.Labels, c, t.Events, n, n, c))
	}
	if c, ok := existing[t.Changelog]; ok && t.Changelog != "" && c != n {
		errs = append(errs, fmt.Errorf("the changelog topic %s has %d partitions and the events topic %s %d: it was left by a run with another partition count, and its state, kept per partition, cannot be moved. If it holds no state you need (a mistaken first start), delete it and start again: the service creates it with %d partitions and learns anew:\n  kafka-topics.sh --bootstrap-server %s --delete --topic %s\nelse point DRIFTSTREAM_CHANGELOG_TOPIC at a new topic (docs/OPERATIONS.md, \"Rebuilding state\")",
			t.Changelog, c, t.Events, n, n, broker, t.Changelog))
	}
	for _, out := range []string{t.Predictions, t.Queries, t.DeadLetters, t.Alerts} {
		if c, ok := existing[out]; ok && out != "" && c < n {
			errs = append(errs, fmt.Errorf("the output topic %s has %d partitions, fewer than the events topic %s's %d: each output is written to its input's partition number; add partitions:\n  kafka-topics.sh --bootstrap-server %s --alter --topic %s --partitions %d",
				out, c, t.Events, n, broker, out, n))
		}
	}
	if len(errs) > 0 {
		return 0, fmt.Errorf("%w: %w", errors.Join(errs...), ErrNotCoPartitioned)
	}
	return n, nil
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
// (checkpoint.KafkaStore.Verify); its errors are permanent but for a broker's
// transient ones (pipeline.IsRetriable).
func (s *Service) checkChangelog(ctx context.Context) error {
	topic := s.cfg.Topics.Changelog
	client := s.adminClient()
	resp, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"cleanup.policy"}}}})
	if err != nil {
		return fmt.Errorf("describe changelog topic %s: %w", topic, err) // the broker: retried when transient (pipeline.IsRetriable)
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

// sizeOutputs reads the record limit of every topic (the topic's
// max.message.bytes, else the broker's message.max.bytes), sizes the
// pipeline's outputs below them and, unless configured, bounds an input
// record by its topic's limit (Pipeline.MaxBytes): it
// refuses a configuration whose own records could exceed one
// (pipeline.Config.Validate for the outputs; the key records' bound here).
func (s *Service) sizeOutputs(ctx context.Context) error {
	t := s.cfg.Topics
	limits, err := s.messageLimits(ctx, t.all())
	if err != nil {
		return err
	}
	if s.cfg.Pipeline.MaxBytes == 0 { // the largest record the input topics can hold
		s.cfg.Pipeline.MaxBytes = max(limits[t.Events], limits[t.Labels])
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
	client := s.adminClient()
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

// The changelog's settings beside cleanup.policy=compact. Kafka compacts
// only closed segments, and the broker's defaults close one at 1 GiB or
// after 7 days: a changelog of 13 MB of live state written at a few MB/s
// grew to 1.5 GB (issue 43) and restores read all of it. Segments of
// 64 MiB, closed at least every 10 minutes, and cleaning once a quarter of
// the log is dirty keep a restore near the live state: at most about
// live / (1 − 0.25) plus one open segment.
const (
	changelogSegmentBytes = 64 << 20
	changelogSegmentMs    = 10 * 60 * 1000
	changelogDirtyRatio   = "0.25"
)

// changelogConfig is the configuration of a changelog the service creates.
func changelogConfig() []kafka.ConfigEntry {
	return []kafka.ConfigEntry{
		{ConfigName: "cleanup.policy", ConfigValue: "compact"},
		{ConfigName: "segment.bytes", ConfigValue: strconv.Itoa(changelogSegmentBytes)},
		{ConfigName: "segment.ms", ConfigValue: strconv.Itoa(changelogSegmentMs)},
		{ConfigName: "min.cleanable.dirty.ratio", ConfigValue: changelogDirtyRatio},
	}
}

// checkChangelogCompaction warns, once at start, when an existing
// changelog's segments are so large or so long-lived that compaction
// seldom reaches them (restores then read far more than the live state),
// naming the command that sets the service's values.
func (s *Service) checkChangelogCompaction(ctx context.Context) {
	topic := s.cfg.Topics.Changelog
	client := s.adminClient()
	resp, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"segment.bytes", "segment.ms"}}}})
	if err != nil || len(resp.Resources) == 0 || resp.Resources[0].Error != nil {
		return // checkChangelog reports a changelog it cannot read
	}
	values := map[string]int64{}
	for _, e := range resp.Resources[0].ConfigEntries {
		if v, err := strconv.ParseInt(strings.TrimSpace(e.ConfigValue), 10, 64); err == nil {
			values[e.ConfigName] = v
		}
	}
	if values["segment.bytes"] > 4*changelogSegmentBytes && values["segment.ms"] > 6*changelogSegmentMs {
		s.log.Warn("the changelog's segments are closed only at segment.bytes or segment.ms, and Kafka compacts only closed ones: restores read the changelog's whole history until then; set the service's values",
			"topic", topic, "segment.bytes", values["segment.bytes"], "segment.ms", values["segment.ms"],
			"fix", fmt.Sprintf("kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config segment.bytes=%d,segment.ms=%d,min.cleanable.dirty.ratio=%s",
				s.cfg.Brokers[0], topic, changelogSegmentBytes, changelogSegmentMs, changelogDirtyRatio))
	}
}

// DefaultTopicCheckInterval is how often a running service reads its input
// topics' partition counts (Config.TopicCheckInterval).
const DefaultTopicCheckInterval = 30 * time.Second

// watchTopics reads the input topics' partition counts every
// TopicCheckInterval until ctx ends. Partitions added to a topic while the
// service runs are not served: the changelog and the outputs have the
// count the service started with, and the keys a grown topic hashes to
// its new partitions left their state behind. They are refused loudly:
// the service turns unready (Ready), driftstream_unread_input_partitions
// counts them, and an error names them and the recovery
// (docs/OPERATIONS.md, "When an input topic grows"), so that they are
// never silently unread. The partitions the service holds keep running.
func (s *Service) watchTopics(ctx context.Context) {
	t := time.NewTicker(s.cfg.TopicCheckInterval)
	defer t.Stop()
	inputs := []string{s.cfg.Topics.Events}
	if s.cfg.Topics.Labels != "" {
		inputs = append(inputs, s.cfg.Topics.Labels)
	}
	reported := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		counts, err := s.partitionCounts(ctx, inputs)
		if err != nil {
			continue // the partitions' own reads report an unreachable cluster
		}
		unread, grown := 0, []string{}
		for _, topic := range inputs {
			if n := counts[topic]; n > s.eventPartitions {
				unread = max(unread, n-s.eventPartitions)
				grown = append(grown, fmt.Sprintf("%s has %d partitions", topic, n))
			}
		}
		s.unreadPartitions.Store(int64(unread))
		if unread == 0 || unread == reported {
			continue
		}
		reported = unread
		reason := fmt.Sprintf("input topic grew while the service runs (%s, the service started with %d): records of the new partitions are not read, and the keys that now hash to them moved away from their state; see docs/OPERATIONS.md, \"When an input topic grows\"",
			strings.Join(grown, ", "), s.eventPartitions)
		s.grown.Store(&reason)
		s.log.Error("input partitions not served", "reason", reason, "unread_partitions", unread)
	}
}

// adminClient is a client of the cluster for requests outside the
// partitions' reads and writes (topic configurations, the group), over the
// configured transport (nil: kafka-go's default).
func (s *Service) adminClient() *kafka.Client {
	client := &kafka.Client{Addr: kafka.TCP(s.cfg.Brokers...), Timeout: s.cfg.Dialer.Timeout}
	if s.cfg.Transport != nil {
		client.Transport = s.cfg.Transport
	}
	return client
}
