#!/usr/bin/env bash
# Throwaway single-node Ceph cluster (mon + memstore OSD + radosgw) on 127.0.0.1 for the S3 test tier.
#   scripts/rgw.sh start <dir> <rgw_port> <mon_port>   returns once the S3 user and the STS role exist
#   scripts/rgw.sh stop <dir>
# Everything lives under <dir>; the OSD keeps data in memory, so stop is a SIGKILL and an rm.
# Credentials of the test user: TESTERACCESSKEY / TESTERSECRETKEY123; STS role arn:aws:iam:::role/vend.
set -euo pipefail
cmd=${1:?start|stop}; D=${2:?dir}

stop() {
  local pids; pids=$(awk '{print $2}' "$D/pids" 2>/dev/null || true)
  for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
  for _ in $(seq 1 50); do
    local alive=0; for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break; sleep 0.1
  done
  rm -rf "$D"
}

start() {
  local PORT=${3:?rgw port} MON_PORT=${4:?mon port}
  rm -rf "$D"; mkdir -p "$D"/{run,log,mon,osd,rgw}
  local FSID; FSID=$(uuidgen)
  # Tuned for a fast start: one PG per pool, short paxos intervals (defaults take ~12 s, this ~1 s);
  # crc client mode is required when auth is off, or radosgw never listens; tcp_nodelay avoids 40 ms stalls.
  cat > "$D/ceph.conf" <<CONF
[global]
fsid = $FSID
mon_host = v2:127.0.0.1:$MON_PORT
public_addr = 127.0.0.1
ms_bind_msgr1 = false
ms_mon_client_mode = crc
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
run_dir = $D/run
admin_socket = $D/run/\$cluster-\$name.asok
log_file = $D/log/\$cluster-\$name.log
pid_file = $D/run/\$cluster-\$name.pid
mon_data = $D/mon/\$cluster-\$id
osd_data = $D/osd/\$cluster-\$id
osd_objectstore = memstore
memstore_device_bytes = 4294967296
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_autoscale_mode = off
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
osd_crush_chooseleaf_type = 0
mon_max_pg_per_osd = 1000
paxos_propose_interval = 0.01
paxos_min_wait = 0.001
osd_pool_default_pg_num = 1
osd_pool_default_pgp_num = 1
osd_memory_target = 939524096
[client.rgw.test]
rgw_frontends = beast endpoint=127.0.0.1:$PORT tcp_nodelay=1
rgw_data = $D/rgw
rgw_sts_key = abcdefghijklmnop
rgw_s3_auth_use_sts = true
rgw_enable_usage_log = false
CONF
  export CEPH_CONF="$D/ceph.conf"
  monmaptool --create --addv a "[v2:127.0.0.1:$MON_PORT]" --fsid "$FSID" "$D/monmap" >/dev/null
  ceph-mon --mkfs -i a --monmap "$D/monmap" >/dev/null
  ceph-mon -i a -f >"$D/log/mon.out" 2>&1 & echo "mon $!" > "$D/pids"
  local OSD_UUID OSD_ID; OSD_UUID=$(uuidgen)
  OSD_ID=$(ceph --connect-timeout 20 osd new "$OSD_UUID")
  mkdir -p "$D/osd/ceph-$OSD_ID"   # memstore asserts when its data dir is missing
  ceph-osd -i "$OSD_ID" --mkfs --osd-uuid "$OSD_UUID" >/dev/null 2>&1
  ceph-osd -i "$OSD_ID" -f >"$D/log/osd.out" 2>&1 & echo "osd $!" >> "$D/pids"
  radosgw -n client.rgw.test -f >"$D/log/rgw.out" 2>&1 & echo "rgw $!" >> "$D/pids"
  for _ in $(seq 1 600); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done
  curl -s -o /dev/null "http://127.0.0.1:$PORT/" || { echo "radosgw did not start; see $D/log" >&2; exit 1; }
  radosgw-admin user create --uid=tester --display-name=tester \
    --access-key=TESTERACCESSKEY --secret-key=TESTERSECRETKEY123 >/dev/null
  radosgw-admin caps add --uid=tester --caps="roles=*" >/dev/null
  radosgw-admin role create --role-name=vend --path=/ \
    --assume-role-policy-doc='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam:::user/tester"]},"Action":["sts:AssumeRole"]}]}' >/dev/null
  radosgw-admin role-policy put --role-name=vend --policy-name=all-s3 \
    --policy-doc='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::*"]}]}' >/dev/null
}

case "$cmd" in
  start) start "$@" ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop <dir> [rgw_port mon_port]" >&2; exit 2 ;;
esac
