"""CloudWatch through boto3 (smithy-rpc-v2-cbor, as botocore 1.43 sends it) against the
gateway in AWS_ENDPOINT_URL: put, read back with GetMetricData, an alarm, and AWS's error
codes. Exits non-zero with a message on any difference."""
import datetime
import sys

import boto3
import botocore.exceptions

cw = boto3.client("cloudwatch")
# A 10-minute boundary, so the datapoints below (1 and 2 minutes before it) fall in one
# Period=600 bucket of GetMetricStatistics whatever the clock says when the test runs.
now = datetime.datetime.now(datetime.timezone.utc).replace(second=0, microsecond=0)
now = now.replace(minute=now.minute - now.minute % 10)
dims = [{"Name": "Service", "Value": "boto"}]
cw.put_metric_data(Namespace="Boto", MetricData=[
    {"MetricName": "Requests", "Dimensions": dims, "Timestamp": now - datetime.timedelta(minutes=2), "Value": 10, "Unit": "Count"},
    {"MetricName": "Requests", "Dimensions": dims, "Timestamp": now - datetime.timedelta(minutes=1),
     "StatisticValues": {"SampleCount": 2, "Sum": 30, "Minimum": 10, "Maximum": 20}, "Unit": "Count"},
])
out = cw.get_metric_data(
    StartTime=now - datetime.timedelta(minutes=10), EndTime=now,
    MetricDataQueries=[{"Id": "req", "MetricStat": {"Metric": {"Namespace": "Boto", "MetricName": "Requests", "Dimensions": dims},
                                                     "Period": 60, "Stat": "Sum"}}],
    ScanBy="TimestampAscending")
res = out["MetricDataResults"][0]
if res["Values"] != [10.0, 30.0] or res["StatusCode"] != "Complete" or res["Timestamps"][0] != now - datetime.timedelta(minutes=2):
    sys.exit(f"GetMetricData: {res}")
stats = cw.get_metric_statistics(Namespace="Boto", MetricName="Requests", Dimensions=dims, StartTime=now - datetime.timedelta(minutes=10),
                                 EndTime=now, Period=600, Statistics=["Average", "SampleCount"])
dp = stats["Datapoints"]
if len(dp) != 1 or dp[0]["SampleCount"] != 3 or abs(dp[0]["Average"] - 40 / 3) > 1e-9 or "Sum" in dp[0]:
    sys.exit(f"GetMetricStatistics: {stats}")
cw.put_metric_alarm(AlarmName="boto-alarm", Namespace="Boto", MetricName="Requests", Dimensions=dims, Statistic="Sum",
                    Period=60, EvaluationPeriods=1, Threshold=5, ComparisonOperator="GreaterThanThreshold", ActionsEnabled=False)
alarms = cw.describe_alarms(AlarmNames=["boto-alarm"])["MetricAlarms"]
if len(alarms) != 1 or alarms[0]["StateValue"] != "INSUFFICIENT_DATA" or alarms[0]["ActionsEnabled"] is not False:
    sys.exit(f"DescribeAlarms: {alarms}")
if not isinstance(alarms[0]["AlarmConfigurationUpdatedTimestamp"], datetime.datetime):
    sys.exit(f"timestamp not parsed: {alarms[0]}")
try:
    cw.put_metric_data(Namespace="AWS/ECS", MetricData=[{"MetricName": "x", "Value": 1}])
    sys.exit("AWS/ namespace accepted")
except botocore.exceptions.ClientError as e:
    if e.response["Error"]["Code"] != "InvalidParameterValue" or e.response["ResponseMetadata"]["HTTPStatusCode"] != 400:
        sys.exit(f"AWS/ namespace: {e.response}")
try:
    cw.get_metric_statistics(Namespace="Boto", MetricName="Requests", StartTime=now, EndTime=now, Period=60)
    sys.exit("no statistics accepted")
except botocore.exceptions.ClientError as e:
    if e.response["Error"]["Code"] != "InvalidParameterCombination":
        sys.exit(f"no statistics: {e.response}")
cw.delete_alarms(AlarmNames=["boto-alarm"])
print("ok")
