package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	agentv1 "github.com/berthhq/berth/gen/berth/agent/v1"
	"github.com/berthhq/berth/gen/berth/agent/v1/agentv1connect"
	"github.com/berthhq/berth/pkg/pki"
)

// logsCommand reads a task's container output from the agent that ran it.
func logsCommand() *cobra.Command {
	var agentURL, container, endpoint, region, cluster string
	var tail int32
	var follow, timestamps bool
	var since time.Duration
	var files pki.Files
	cmd := &cobra.Command{
		Use:   "logs TASK",
		Short: "Print a task's stdout and stderr: awslogs containers from the log store, others from the agent",
		Long: "TASK is a task ARN or id. Containers with logDriver awslogs are read from Berth's\n" +
			"CloudWatch Logs store through the gateway (GetLogEvents), which keeps them after the\n" +
			"task and its host are gone; the others from the agent that ran them, which keeps\n" +
			"each container's output under its data dir for its retention period.",
		Example: "  berth logs 58e913366baf34c0b9a0fd6f2173e085 --tail 20\n" +
			"  berth logs arn:aws:ecs:us-east-1:000000000000:task/default/58e9... --follow",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Containers with the awslogs driver are read from the CloudWatch Logs store
			// (what `aws logs get-log-events` reads); the others from the agent.
			aws := awsClient{endpoint: endpoint, region: region, accessKey: cli.Env("BERTH_ACCESS_KEY_ID", "test"), secretKey: cli.Env("BERTH_SECRET_ACCESS_KEY", "test")}
			if targets, err := aws.awslogsTargets(cmd.Context(), cluster, args[0], container); err == nil && len(targets) > 0 {
				for _, t := range targets {
					if err := aws.printAWSLogs(cmd.Context(), cmd.OutOrStdout(), t, tail, since, follow, timestamps); err != nil {
						return fmt.Errorf("%s (log group %s, stream %s): %w", t.container, t.group, t.stream, err)
					}
				}
				return nil
			}
			hc, err := cli.HTTPClient(agentURL, files)
			if err != nil {
				return fmt.Errorf("--agent: %w", err)
			}
			client := agentv1connect.NewLogServiceClient(hc, agentURL)
			req := &agentv1.ReadLogsRequest{TaskArn: args[0], ContainerName: container, Tail: tail, Follow: follow}
			if since > 0 {
				req.Since = timestamppb.New(time.Now().Add(-since))
			}
			stream, err := client.ReadLogs(cmd.Context(), connect.NewRequest(req))
			if err != nil {
				return err
			}
			defer stream.Close()
			out := cmd.OutOrStdout()
			for stream.Receive() {
				for _, l := range stream.Msg().GetLines() {
					printLogLine(out, l, timestamps)
				}
			}
			if err := stream.Err(); err != nil && !errors.Is(err, io.EOF) && cmd.Context().Err() == nil {
				return err
			}
			return nil
		},
	}
	f := cmd.Flags()
	cli.AddTLSFlags(f, &files, "presented to an agent whose log service is https:// (role client, admin or gateway)")
	f.StringVar(&agentURL, "agent", cli.Env("BERTH_AGENT_LOG_URL", "http://127.0.0.1:4568"), "URL of the agent's log service (json-file containers)")
	f.StringVar(&endpoint, "endpoint", cli.Env("BERTH_ENDPOINT", "http://"+cli.Env("BERTH_GATEWAY_ADDR", "127.0.0.1:4566")), "Berth's gateway, where the task and its awslogs output are looked up (keys: BERTH_ACCESS_KEY_ID, BERTH_SECRET_ACCESS_KEY)")
	f.StringVar(&region, "region", cli.Env("BERTH_REGION", "us-east-1"), "region of the task")
	f.StringVar(&cluster, "cluster", "", "cluster of the task (default: from the task ARN, else default)")
	f.StringVarP(&container, "container", "c", "", "only this container")
	f.Int32VarP(&tail, "tail", "n", 0, "only the last N lines (0: all)")
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new lines until the task stops")
	f.BoolVarP(&timestamps, "timestamps", "t", false, "prefix each line with its time")
	f.DurationVar(&since, "since", 0, "only lines newer than this (e.g. 10m)")
	return cmd
}

func printLogLine(w io.Writer, l *agentv1.LogLine, timestamps bool) {
	if timestamps {
		fmt.Fprintf(w, "%s %s %s: %s\n", l.GetTime().AsTime().Format(time.RFC3339Nano), l.GetContainerName(), l.GetStream(), l.GetText())
		return
	}
	fmt.Fprintf(w, "%s: %s\n", l.GetContainerName(), l.GetText())
}
