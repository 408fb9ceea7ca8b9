"""Maintenance of a window over the API (contract §12.1): queue a job for the bound maintainer, or
run one as an external maintainer (plan, read its pages, commit a checkpoint); list the jobs."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from contextproto.api import AnyJSONField, StrictIntegerField, StrictSerializer, page_limit
from sessions_app import maintenance
from sessions_app.api import shapes
from sessions_app.api.views import session_for
from sessions_app.api.wire import MaintenanceJobWire
from sessions_app.models import MaintenanceJob
from sessions_app.reads import lists


def job_to_wire(job: MaintenanceJob) -> MaintenanceJobWire:
    return {
        "jobId": str(job.id),
        "status": job.status,
        "windowId": job.window_id,
        "trigger": job.trigger,
        "external": job.external,
        "frozenRevision": job.frozen_revision,
        "fromIndex": job.from_index,
        "throughIndex": job.through_index,
        "sourceHash": job.source_hash or None,
        "pageCount": job.page_count,
        "pagesRead": job.pages_read,
        "attempts": job.attempts,
        "reason": job.reason or None,
        "tokensBefore": job.tokens_before,
        "tokensAfter": job.tokens_after,
    }


class MaintenanceRequestApi(APIView):
    """Queue maintenance of a window by the bound maintainer Agent."""

    class Output(serializers.Serializer):
        jobId = serializers.UUIDField()
        status = serializers.CharField()

    @extend_schema(request=None, responses={202: Output})
    def post(self, request: Request, session_id: str, window_id: str) -> Response:
        session = session_for(request, session_id)
        lists.window_record_get(session, window_id)
        if request.data not in ({}, None):
            StrictSerializer.parse(request.data)
        job, _created = maintenance.maintenance_request(
            session_id=session.id, window_id=window_id, trigger="api"
        )
        return Response(
            {"jobId": str(job.id), "status": job.status}, status=status.HTTP_202_ACCEPTED
        )


class MaintenancePlanApi(APIView):
    class Input(StrictSerializer):
        # Any JSON integer (not "3", not true): one that is no boundary (0 and below too)
        # is the service's maintenance_boundary_invalid with the nearest valid boundary
        # (contract §12.1).
        throughIndex = StrictIntegerField(required=False, allow_null=True)

    class Output(serializers.Serializer):
        jobId = serializers.UUIDField()
        frozenRevision = serializers.IntegerField()
        windowId = serializers.CharField()
        fromIndex = serializers.IntegerField()
        throughIndex = serializers.IntegerField()
        sourceHash = serializers.CharField()
        pageCount = serializers.IntegerField()
        previousCheckpoint = serializers.CharField(allow_blank=True)
        blockedBy = serializers.ListField(child=serializers.DictField())

    @extend_schema(request=Input, responses={201: Output})
    def post(self, request: Request, session_id: str, window_id: str) -> Response:
        session = session_for(request, session_id)
        lists.window_record_get(session, window_id)
        data = self.Input.parse(request.data)
        # A refused plan writes no job (it would block the window); see the service.
        job, plan = maintenance.maintenance_external_plan(
            session_id=session.id, window_id=window_id, through_index=data.get("throughIndex")
        )
        return Response(
            {
                "jobId": str(job.id),
                "frozenRevision": plan.frozen_revision,
                "windowId": window_id,
                "fromIndex": plan.covered_through + 1,
                "throughIndex": plan.through_index,
                "sourceHash": plan.source_hash,
                "pageCount": plan.page_count,
                "previousCheckpoint": plan.previous_checkpoint,
                "blockedBy": list(plan.blocked_by),
            },
            status=status.HTTP_201_CREATED,
        )


class MaintenancePageApi(APIView):
    class Output(serializers.Serializer):
        page = serializers.IntegerField()
        pageCount = serializers.IntegerField()
        messages = shapes.Message(many=True)

    @extend_schema(responses={200: Output})
    def get(self, request: Request, session_id: str, window_id: str, job_id: str, page: int):
        session = session_for(request, session_id)
        job = maintenance.job_for(session, window_id, job_id)
        rows, page_count = maintenance.maintenance_page(job=job, page=page)
        return Response(
            {"page": page, "pageCount": page_count, "messages": [m.to_wire() for m in rows]}
        )


class MaintenanceCommitApi(APIView):
    class Input(StrictSerializer):
        checkpoint = AnyJSONField()

    class Output(serializers.Serializer):
        stateRevision = serializers.IntegerField()
        coveredThrough = serializers.IntegerField()

    @extend_schema(request=Input, responses={200: Output})
    def post(self, request: Request, session_id: str, window_id: str, job_id: str) -> Response:
        session = session_for(request, session_id)
        job = maintenance.job_for(session, window_id, job_id)
        data = self.Input.parse(request.data)
        revision, covered = maintenance.maintenance_commit(job=job, checkpoint=data["checkpoint"])
        return Response({"stateRevision": revision, "coveredThrough": covered})


class MaintenanceJobsApi(APIView):
    class Output(serializers.Serializer):
        jobs = shapes.MaintenanceJob(many=True)

    @extend_schema(responses={200: Output})
    def get(self, request: Request, session_id: str) -> Response:
        session = session_for(request, session_id)
        jobs = lists.maintenance_jobs_recent(session, limit=page_limit(None))
        return Response({"jobs": [job_to_wire(j) for j in jobs]})
