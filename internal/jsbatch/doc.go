// Package jsbatch publishes JetStream atomic batches (nats-server 2.12+):
// several messages to one stream, stored together or not at all, acked
// once. nats.go v1.55 has no helper for it, so the headers are set here.
//
// A batch needs AllowAtomicPublish on its stream; AllowAtomic turns it on
// for a stream that predates it (it needs a connection that may update
// streams). The server refuses a batch of more than 1,000 messages by
// default (jetstream limits max_batch_size); callers stay at or below Max.
package jsbatch
